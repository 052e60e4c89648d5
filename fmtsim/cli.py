"""The ``fmtsim`` command: parses arguments, calls the library, prints tables.

Exit codes: 0 success, 1 conformance failures, 2 usage errors (bad names,
malformed numbers or codes).
"""

from __future__ import annotations

import argparse
import csv
import fnmatch
import io
import math
import re
import sys
import time
from collections.abc import Sequence
from fractions import Fraction
from typing import Any, NoReturn

import numpy as np

from . import __version__, argcheck
from .bitpatterns import BitPattern, flags_text, parse_pattern, short_value
from .checkpoint.cli import add_checkpoint_parser, add_fnuz_convert_arguments
from .compare.cli import add_compare_parser
from .describe import (
    CODE_COLUMNS,
    FORMAT_COLUMNS,
    code_bits,
    code_rows,
    exact_text,
    format_rows,
    hex_value,
)
from .formats import Format, get_format
from .mma.cli import add_mma_parser
from .numbers import parse_integer, parse_number, round_to_float
from .oracle import encode_one
from .policy import (
    NAN_MODE_TEXT,
    NAN_MODES,
    OVERFLOW_MODE_TEXT,
    OVERFLOW_MODES,
    PROFILES,
    ROUNDING_MODE_TEXT,
    ROUNDING_MODES,
    resolve,
)
from .tables import table


class UsageError(Exception):
    """A problem with what the user typed: reported on stderr, exit status 2."""


def _table(rows: list[list[str]], headers: list[str], droppable: tuple[str, ...] = ()) -> str:
    return table(rows, headers, droppable=droppable)


def _fmt(name: str) -> Format:
    try:
        return get_format(name)
    except ValueError as e:
        raise UsageError(str(e)) from None


def parse_value(text: str) -> float | Fraction:
    """A number exactly as written (fmtsim.numbers): decimal, hex float, ratio, inf or nan. An
    integer with a 0x/0o/0b prefix is refused: fmtsim prints codes and bit patterns that way, so
    ``0x3a800000`` could be the number 981467136 or float32 bits, and it is not guessed which."""
    try:
        v = parse_number(text)
    except ValueError as e:
        raise UsageError(str(e)) from None
    body = text.strip().lower().lstrip("+-")
    if body[:2] in ("0x", "0o", "0b"):
        try:
            n = parse_integer(text)
        except ValueError:
            return v  # a hex float (0x1.8p3, 0x1p-3): only one reading
        hex_float = f" (or the hex float {text.strip()}p0)" if body[:2] == "0x" else ""
        raise UsageError(
            f"{text!r} could be the number {n} or a bit pattern, so it is refused: write the number as {n}"
            f"{hex_float}, a bit pattern with its type, as in f32:{abs(n):#010x} (f16:, bf16:, f64:, or a format "
            "name for one of its codes: e5m2:0x3c)")
    return v


def parse_input(text: str) -> float | Fraction | BitPattern:
    """One input of ``fmtsim encode``/``diff``: a bit pattern ``TYPE:0xHEX`` (fmtsim.bitpatterns),
    as ``fmtsim ver`` and ``conform`` print inputs, or a number (:func:`parse_value`)."""
    try:
        p = parse_pattern(text)
    except ValueError as e:
        raise UsageError(f"not a bit pattern: {e}") from None
    return p if p is not None else parse_value(text)


def _rbits(text: str) -> int:
    try:
        v = parse_integer(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"random bits are non-negative, not {v}")
    return v


# argparse reads a token starting with '-' as an option unless it looks like a negative number to
# its private _negative_number_matcher (stable since Python 3.2); numbers here are also -inf, -nan,
# -0x1p3 and -.5, so the commands that take numbers widen it
_NEGATIVE_NUMBER = re.compile(r"^-(\d|\.\d|0x|inf|nan|[a-z][a-z0-9_]*:)", re.I)


def parse_code(text: str, f: Format) -> int:
    """A code of ``f``: an integer (digits alone are decimal), or ``FORMAT:0xCODE`` naming ``f``."""
    try:
        p = parse_pattern(text)
    except ValueError as e:
        raise UsageError(f"not a code: {e}") from None
    if p is not None:
        if p.tag != f.name:
            raise UsageError(f"not a code of {f.name}: {text!r} is a {p.src if p.is_source_type else p.tag} "
                             f"bit pattern" + (f" (encode it: fmtsim encode {f.name} {p})" if p.is_source_type
                                               else ""))
        return p.bits
    try:
        c = parse_integer(text)
    except ValueError as e:
        body = text.strip().lower().lstrip("+-")
        if body and all(ch in "0123456789abcdef_" for ch in body) and body[0] != "_":
            raise UsageError(f"not a code: {text!r} has hex digits but no 0x; write 0x{text.strip()} (digits "
                             "alone are decimal)") from None
        raise UsageError(f"not a code: {str(e).removeprefix('not an integer: ')}") from None
    if not 0 <= c < f.n_codes:
        raise UsageError(f"{f.name}: code {text} is outside 0..{f.n_codes - 1:#x}")
    return c


def _value_text(f: Format, code: int) -> str:
    if f.kind == "float" and f.code_class(code) == "zero" and code & f.sign_mask:
        return "-0"
    return exact_text(f.code_value(code))


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


def _is_tie(f: Format, v: Fraction, lo: int | None, hi: int | None) -> bool:
    """v lies halfway between its neighbours; past the largest (or smallest) finite value the
    neighbour is the step the format would take next (the overflow tie: E4M3 464, E5M2 61440)."""
    if lo is not None and hi is not None:
        if lo == hi:
            return False
        return v * 2 == Fraction(f.code_value(lo)) + Fraction(f.code_value(hi))
    edge = lo if lo is not None else hi
    if edge is None:
        return False
    edge_value = Fraction(f.code_value(edge))
    if edge_value == 0:
        return False
    # edge is the largest or smallest finite value: the next step up is one ulp of its binade
    step = Fraction(2) ** (f.scale_exp if f.kind == "int" else f.emax - f.man_bits)
    return v == (edge_value + step / 2 if lo is not None else edge_value - step / 2)


def cmd_formats(args: argparse.Namespace) -> int:
    # on a narrow terminal: what `fmtsim table FMT` and the name say anyway goes first
    print(_table(format_rows(), FORMAT_COLUMNS, droppable=("description", "ml_dtypes", "emax", "exp", "man",
                                                           "bias", "neg_zero")))
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
    if pol.rounding != "sr" and args.rbits is not None:
        raise UsageError(f"--rbits is only used with --rounding sr (rounding is {pol.rounding})")
    inputs = [(text, parse_input(text)) for text in args.values]
    for text, v in inputs:
        if args.src is not None and isinstance(v, BitPattern) and v.is_source_type and v.src != args.src:
            raise UsageError(f"{text} is a {v.src} bit pattern, and --src says {args.src}: the source type is "
                             "the pattern's own (leave --src out)")
    rows = []
    for text, v in inputs:
        nan_bits = None
        src = args.src or "float32"  # a number has no source type: --src, default float32
        if isinstance(v, BitPattern):
            x: float | Fraction = v.value()
            if v.is_source_type or src == "float32":  # a format's code reaches the encoder as a float32
                src = v.src
                nan_bits = v.ieee_bits() if x != x else None
        else:
            x = v
        if isinstance(x, float) and x != x and pol.on_nan.mode == "raise":
            raise UsageError(f"{f.name} has no NaN encoding; choose one with --nan")
        code, flags = encode_one(x, f, rbits=args.rbits or 0, src=src, policy=pol, nan_bits=nan_bits,
                                 nan_bits32=nan_bits if src == "float32" else None)
        lo = hi = None
        tie = False
        if isinstance(x, Fraction) or (isinstance(x, float) and x == x and abs(x) != float("inf")):
            exact = Fraction(x)
            lo, hi = (code, code) if flags == 0 else _neighbours(f, exact)
            tie = _is_tie(f, exact, lo, hi)
        width = (f.bits + 3) // 4
        # what the bits mean, beside them (shortest float64 digits; the pattern itself is the input)
        shown = f"{text} ({short_value(v.as_array())})" if isinstance(v, BitPattern) else text
        rows.append([
            shown,
            f"0x{code:0{width}X}",
            code_bits(f, code),
            _value_text(f, code),
            "-" if lo is None else f"0x{lo:0{width}X} ({_value_text(f, lo)})",
            "-" if hi is None else f"0x{hi:0{width}X} ({_value_text(f, hi)})",
            "yes" if tie else "no",
            flags_text(flags),
        ])
    print(f"{f.name}: rounding={pol.rounding} overflow={pol.on_overflow.mode} nan={pol.on_nan.mode}")
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


def _implementation_names() -> str:
    from .conformance.impls import registry

    return ", ".join(f"{n} ({i.install})" if i.install else n for n, i in registry().items())


def _implementation_progress() -> tuple[Any, Any]:
    """(progress(done, total, name), close()) for conform: a tqdm bar on stderr, one step per
    implementation and naming the one running, where stderr is a terminal; nothing elsewhere
    (logs and pipes stay fmtsim's table alone)."""
    if not sys.stderr.isatty():
        return None, lambda: None
    try:
        from tqdm import tqdm
    except Exception:  # no tqdm (the checkpoint extra brings it), or a broken one: no bar
        return None, lambda: None
    bar: list[Any] = []

    def update(done: int, total: int, name: str) -> None:
        if not bar:
            bar.append(tqdm(total=total, unit="implementation", file=sys.stderr, leave=False))
        bar[0].update(done - bar[0].n)
        bar[0].set_description(name or "done")

    return update, lambda: bar and bar[0].close()


def cmd_conform(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .conformance.run import find_vectors, run

    t0 = time.perf_counter()
    vec = Path(args.vectors) if args.vectors else find_vectors()
    if vec is not None and not (vec / "manifest.json").exists():
        raise UsageError(f"{vec}: no manifest.json (generate vectors with 'fmtsim gen -o {vec}')")
    print(f"golden vectors: {vec if vec is not None else 'none found (pass --vectors DIR)'}")
    skipped: list[str] = []
    progress, close = _implementation_progress()
    try:
        rows = run(tuple(args.impl), args.formats, big=not args.quick, vectors=vec, profile=args.profile,
                   skipped=skipped if len(args.impl) > 1 else None, progress=progress)
    except ValueError as e:
        raise UsageError(str(e)) from None
    finally:
        close()
    for why in skipped:
        print(f"skipped {why}")
    from .conformance.environment import header_line
    from .conformance.impls import get_implementation

    for spec in args.impl:  # the versions and profile variants actually run, for the record
        if ":" not in spec and not any(why.startswith(f"{get_implementation(spec).name}:") for why in skipped):
            print(header_line(get_implementation(spec), args.profile))
    if skipped and not rows:
        raise UsageError("nothing could run here: " + "; ".join(skipped))
    if sum(r.cases for r in rows) == 0:
        what = "; ".join(f"{spec} checks {get_implementation(spec).covers()}" for spec in args.impl
                         if ":" not in spec)
        raise UsageError(f"nothing to check: no coverage model applies to {' '.join(args.impl)} with formats "
                         f"{' '.join(args.formats or ['(all)'])}" + (f" ({what})" if what else ""))
    table = []
    for r in rows:
        known = "; ".join(f"{k}: {v}" for k, v in r.known.items()) or "-"
        table.append([r.impl, r.fmt, r.model, str(r.cases), str(r.passed), known, str(r.failed)])
    print(_table(table, ["implementation", "format", "model", "cases", "passed",
                         "known divergences", "failed"]))
    failed = sum(r.failed for r in rows)
    cases = sum(r.cases for r in rows)
    known_total = sum(sum(r.known.values()) for r in rows)
    by_rule = [(r, rule, n, why) for r in rows if r.rules is not None for rule, n, why in r.rules.summary()]
    if by_rule:  # the rules broken, before the lines that break them
        print("\nunexpected failures by rule (one example each):")
        for r, rule, n, why in by_rule:
            print(f"  {r.impl} {r.fmt} {r.model}: {rule}: {n} ({why})")
        for r in rows:
            if r.rules is not None and r.rules.unclassified:
                print(f"  {r.impl} {r.fmt} {r.model}: not classified: {r.rules.unclassified} (past the first "
                      f"{r.rules.limit})")
    for r in rows:
        for example in r.examples:
            print(f"FAIL {r.impl} {r.fmt} {r.model}{' (unverified)' if r.unverified else ''}: {example}")
    unverified = {r.impl: r.unverified for r in rows if r.unverified}
    for impl, why in unverified.items():  # said once per entry point, after its failures
        print(f"unverified: {impl}: {why}")
    soft = sum(r.failed for r in rows if r.unverified)
    note = ""
    if soft:
        note = (f"; {soft} of them on unverified versions" +
                (", counted (--strict)" if args.strict else ", not counted in the exit status (--strict counts them)"))
    print(f"\n{cases} cases, {cases - failed - known_total} passed, {known_total} known "
          f"divergences, {failed} unexpected failures{note} ({time.perf_counter() - t0:.1f} s)")
    return 1 if failed - (0 if args.strict else soft) else 0


def cmd_env(args: argparse.Namespace) -> int:
    import json

    from .conformance.environment import environment, render

    env = environment(args.impl)
    print(json.dumps(env, indent=2) if args.json else render(env))
    return 0


def _vector_files(level: int, seed: int, progress: bool = False) -> list[Any]:
    import itertools

    from .conformance.gemm_vectors import gemm_files
    from .conformance.vectors import (
        block_files,
        dot_files,
        fmt2fmt_files,
        layout_files,
        scalar_file_count,
        scalar_files,
    )

    # the conversion files are the long part at level 2, and their count is known before they are
    # made: the bar counts them against that total; the others take seconds
    scalar: Any = scalar_files(level, seed)
    if progress:
        try:
            from tqdm import tqdm

            scalar = tqdm(scalar, total=scalar_file_count(level), desc=f"level {level} conversion vectors",
                          unit="file")
        except Exception:  # no tqdm, or a broken one: no bar
            pass
    made = list(scalar)
    return made + list(itertools.chain(fmt2fmt_files(), block_files(seed + 1), layout_files(), dot_files(),
                                       gemm_files()))


def _not_built_in(name: str) -> bool:
    """A format name gen's built-in vector set has no files for (a P3109 format, a spec string)."""
    from .formats import FORMATS

    try:
        return get_format(name).name not in FORMATS
    except ValueError:
        return False  # not a format: the usual 'no vector file matches' says so


def cmd_gen(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .conformance.vectors import check_output_dir, earlier_entries, write_vectors

    if args.output is not None and not args.list:  # before the work, not after it
        if not args.output:
            raise ValueError("-o: the path is empty (it would mean the current directory); name a directory")
        check_output_dir(Path(args.output))
        earlier_entries(Path(args.output), [])  # an earlier manifest there that cannot be merged
    policy_op = re.fullmatch(r"(f16|bf16|f32|f64)_to_(\w+)", args.op)
    # a format outside the built-in vector set (P3109's, a spec string): its default policy's files
    own_format = bool(policy_op) and _not_built_in(policy_op.group(2))  # type: ignore[union-attr]
    if args.rounding or args.overflow or args.profile or own_format:
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
    if args.op != "all" and not (args.rounding or args.overflow or args.profile or own_format):
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
    kept = f" (it also lists {manifest['kept']} file(s) an earlier run wrote there)" if manifest["kept"] else ""
    print(f"wrote {len(files)} files and manifest.json to {args.output}{kept}")
    return 0


def cmd_ver(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .conformance.run import find_vectors
    from .conformance.vectors import load_manifest

    if args.op.endswith(".npy") and Path(args.op).is_file():
        return _verify_d(args)
    if args.op != "all" and Path(args.op).name != args.op:
        # a path to a vector file (vecs/NAME after 'fmtsim gen -o vecs'): its directory holds the manifest
        if args.vectors and Path(args.vectors).resolve() != Path(args.op).parent.resolve():
            raise UsageError(f"{args.op} names a directory other than --vectors {args.vectors}")
        args.vectors, args.op = str(Path(args.op).parent), Path(args.op).name
    found = Path(args.vectors) if args.vectors else find_vectors()
    if found is None:
        raise UsageError("no golden vectors installed with fmtsim; pass --vectors DIR")
    vec_dir = found
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
        raise UsageError(f"{args.op!r} is not in {vec_dir}/manifest.json (for vectors written with "
                         "'fmtsim gen -o DIR', pass DIR/NAME or --vectors DIR)")
    else:
        jobs = [(args.op, args.file)]
    summary: dict[tuple[str, str], list[int]] = {}
    failed = 0
    unreadable: list[str] = []
    for name, path in jobs:
        meta = manifest["files"][name]
        try:
            res = _verify_one(vec_dir, name, path, meta, args)
        except (ValueError, TypeError, OSError) as e:
            if len(jobs) == 1:
                raise UsageError(str(e)) from None
            # ver all: a result file it cannot read is reported and the others are still checked
            print(f"{name}: not checked: {e}")
            unreadable.append(name)
            continue
        rules = res.summary() if hasattr(res, "summary") else []
        if rules:  # the rules broken, before the lines that break them
            print(f"{name}: {res.failed} {'mismatch' if res.failed == 1 else 'mismatches'} by rule:")
            for line in rules:
                print(f"  {line}")
        explained = getattr(res, "explained_by", [])
        if explained:  # a policy the device follows on every line: what it is, rather than what it breaks
            print(f"{name}: every line matches fmtsim under {', '.join(explained)}")
        for m in res.messages:
            print(f"{name}: {m}" if len(jobs) > 1 else m)
        if getattr(res, "note", ""):
            print(f"{name}: {res.note}")
        print(f"{name}: {res.cases} cases, {res.cases - res.failed} passed, {res.failed} failed "
              f"({meta.get('coverage_model', '-')})")
        fmt_meta, unit_meta = meta.get("format"), meta.get("unit")
        fmt_name = fmt_meta.get("name") if isinstance(fmt_meta, dict) else None
        unit_name = unit_meta.get("name") if isinstance(unit_meta, dict) else None
        key = (str(fmt_name or unit_name or meta.get("operation", "-")), str(meta.get("coverage_model", "-")))
        cell = summary.setdefault(key, [0, 0, 0])
        cell[0] += 1
        cell[1] += res.cases
        cell[2] += res.failed
        failed += res.failed
    if len(jobs) > 1:
        rows = [[f, m, str(n), str(c), str(c - x), str(x)] for (f, m), (n, c, x) in sorted(summary.items())]
        print()
        print(_table(rows, ["format", "coverage model", "files", "cases", "passed", "failed"]))
        if unreadable:
            print(f"\n{len(unreadable)} of {len(jobs)} result files could not be checked: {', '.join(unreadable)}")
    if unreadable:
        return 2  # a result file that cannot be read is bad input, whatever the others say
    return 1 if failed else 0


def _verify_d(args: argparse.Namespace) -> int:
    """fmtsim ver D.npy DEVICE_D: a device's GEMM result against fmtsim's (fmtsim mma matmul -o D.npy)."""
    from .mma.dfiles import compare_d, read_array

    if not args.file:
        raise UsageError(f"fmtsim ver {args.op} DEVICE_D: give the device's D (.npy, or raw float32 row-major)")
    expected = read_array(args.op, "fmtsim's D", None, np.float32)
    if expected.dtype != np.float32:
        raise UsageError(f"{args.op}: fmtsim's D is float32, this file holds {expected.dtype}")
    actual = read_array(args.file, "the device's D", expected.shape, np.float32)
    if actual.dtype != np.float32:
        raise UsageError(f"{args.file}: the device's D must be float32, not {actual.dtype}")
    res = compare_d(expected, actual, check_nans=args.check_nans, max_errors=args.errors)
    for line in res.report():
        print(line)
    return 1 if res.failed else 0


def _verify_one(vec_dir: Any, name: str, path: str | None, meta: dict[str, Any], args: argparse.Namespace) -> Any:
    from pathlib import Path

    from .conformance.vectors import check_sha256, verify_binary, verify_results

    what = path if path not in (None, "-") else "stdin"
    vector = (vec_dir / name).read_bytes()
    check_sha256(vector, meta, vec_dir / name)
    actual = sys.stdin.buffer.read() if path in (None, "-") else Path(path).read_bytes()
    if name.endswith(".bin"):
        return verify_binary(vector, actual, meta, max_errors=args.errors, what=what,
                             family=getattr(args, "family_tolerance", False))
    try:
        expected = vector.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{vec_dir / name}: the vector file is not UTF-8 text") from None
    return verify_results(expected, actual, meta, check_flags=not args.ignore_flags, check_nans=args.check_nans,
                          max_errors=args.errors, what=what)


def cmd_probe(args: argparse.Namespace) -> int:
    from .mma import probe

    if args.action == "gen":
        if not args.output:
            raise UsageError("fmtsim probe gen: give -o DIR")
        try:
            names = probe.write_probes(args.output, args.set, args.seed)
        except (ValueError, OSError) as e:
            raise UsageError(str(e)) from None
        for name in names:
            print(f"{args.output}/{name}")
        return 0
    if not args.results:
        raise UsageError("fmtsim probe infer RESULTS...: give the result file(s), probe.<set>.d.bin")
    sets = args.set or [None]
    if len(sets) not in (1, len(args.results)):
        raise UsageError(f"probe infer: --set names {len(sets)} sets for {len(args.results)} result file(s); give one "
                         "set for all files, or one per file in the same order")
    matched = True
    for i, path in enumerate(args.results):
        try:
            name, d, ops = probe.read_results(path, sets[i if len(sets) > 1 else 0], args.probes)
        except (ValueError, OSError) as e:
            raise UsageError(str(e)) from None
        inf = probe.infer(name, d, ops)
        print(f"{path}:")
        for line in inf.report():
            print(f"  {line}")
        # exit 0 only where a named unit reproduces every output: a consistent parameter set
        # that is no unit fmtsim names is a finding to act on, as is no consistent set at all
        matched &= bool(inf.named)
    return 0 if matched else 1


def cmd_diff(args: argparse.Namespace) -> int:
    from .conformance.diff import diff_rows

    values: list[tuple[str, Any, str, str]] | None = None
    formats = [_fmt(args.format).name] if args.format else None
    if args.values:
        if formats is None:
            raise UsageError("fmtsim diff VALUE... needs --format FMT")
        values = []
        for text in args.values:
            given = parse_input(text)
            v = given.value() if isinstance(given, BitPattern) else given
            x = round_to_float(v, args.src)
            if isinstance(given, BitPattern) and not (float(x) == v or (x != x and v != v)):
                raise UsageError(f"{text} is not a {args.src} value; implementations are compared on {args.src} "
                                 f"arrays (--src), and its value would be rounded first")
            if np.isinf(x) and not (isinstance(v, float) and math.isinf(v)):
                raise UsageError(f"{text} is beyond {args.src}'s range; implementations are compared on "
                                 f"{args.src} arrays (use 'fmtsim encode' for any exact value)")
            values.append((formats[0], x, args.src, ""))
    headers, rows = diff_rows(values, args.profiles, formats=formats)
    if not rows:
        assert formats is not None
        raise UsageError(f"the built-in disagreement set has no {formats[0]} cases; give values: "
                         f"fmtsim diff VALUE... --format {formats[0]}")
    print(_table(rows, headers))
    print("\n* the profiles disagree;  ! ml_dtypes differs from its own profile (a named divergence)")
    return 0


def _one_line(message: str) -> str:
    """An error message as one printable line: control characters (a user's \\r, a file's \\n) escaped."""
    return re.sub(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]", lambda m: ascii(m.group())[1:-1], message)


class _Parser(argparse.ArgumentParser):
    """argparse, with usage errors reported as the one line every fmtsim error is."""

    def error(self, message: str) -> NoReturn:
        where = "" if self.prog == "fmtsim" else f"{self.prog.removeprefix('fmtsim ')}: "
        print(_one_line(f"fmtsim: error: {where}{message} (see '{self.prog} --help')"), file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="fmtsim", description="Bit-exact low-precision format reference")
    p.add_argument("--version", action="version", version=f"fmtsim {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("formats", help="list every format and its derived numbers")
    s.set_defaults(func=cmd_formats)

    s = sub.add_parser("table", help="every code of a format: fields, class, exact value")
    s.add_argument("format", help="the format (fmtsim list formats)")
    s.add_argument("--csv", action="store_true", help="CSV instead of a text table")
    s.set_defaults(func=cmd_table)

    numbers = ("each value is a number or a bit pattern. Numbers are read exactly, in one grammar: decimal integers "
               "(123, 1_000; leading zeros stay decimal), decimals (-1.5e-3), C99 hex floats (0x1.8p3, 0x7fp0), "
               "ratios (1/3), inf, nan; single underscores between digits as in Python. A bit pattern is TYPE:0xHEX "
               "as 'fmtsim ver' and 'conform' print inputs: f32:0x3a800000, bf16:0x7f81, f16:0x3c00, "
               "f64:0x3ff0000000000000 (that type's bits, NaN sign and payload included), or FORMAT:0xCODE "
               "(e5m2:0x3c, a code of that format). An integer with a base prefix (0x7f, 0o17, 0b101) could be a "
               "number or a bit pattern and is refused")
    s = sub.add_parser("encode", help="encode values (exact decimals, hex floats, inf, nan, bit patterns)",
                       description=numbers)
    s._negative_number_matcher = _NEGATIVE_NUMBER
    s.add_argument("format", help="the format to encode into (fmtsim list formats)")
    s.add_argument("values", nargs="+", help="numbers or bit patterns (TYPE:0xHEX), as described above")
    s.add_argument("--rounding", choices=ROUNDING_MODES, help="rounding mode (default rne, or the --profile's; "
                   "fmtsim list rounding)")
    s.add_argument("--overflow", choices=OVERFLOW_MODES, help="overflow policy (default satfinite, or the "
                   "--profile's; fmtsim list overflow)")
    s.add_argument("--nan", choices=NAN_MODES, metavar="MODE", help="what a NaN input becomes (default signed "
                   "where the format has a NaN, raise for FP4/FP6/integers, or the --profile's; fmtsim list nan)")
    s.add_argument("--profile", choices=list(PROFILES), metavar="NAME", help="the rules of a named "
                   "implementation (default: the OCP spec's with the options above; fmtsim list profiles)")
    s.add_argument("--rbits", type=_rbits,
                   help="random bits for --rounding sr (a non-negative integer: decimal, 0x.., 0o.., 0b..)")
    s.add_argument("--src", choices=["float16", "bfloat16", "float32", "float64"],
                   help="source type of the numbers: its ulp sets how many bits sr discards, and profiles that "
                        "treat sources apart read it (default float32; a bit pattern's own type for a bit "
                        "pattern, which --src may not contradict)")
    s.set_defaults(func=cmd_encode)

    s = sub.add_parser("decode", help="decode codes (integers: decimal, 0x hex, 0o octal, 0b binary)",
                       description="codes are integers: 123, 0017 (decimal: digits alone are always decimal), 0x7f, "
                                   "0o17, 0b1000_0000, single underscores between digits, or FORMAT:0xCODE "
                                   "(e4m3:0x7e) naming the format given. Codes in .tv vector files are bare hex "
                                   "digits: write them with 0x (7E is refused, 10 is ten)")
    s.add_argument("format", help="the format the codes belong to (fmtsim list formats)")
    s.add_argument("codes", nargs="+", help="codes: decimal, 0x.., 0o.., 0b.., or FORMAT:0xCODE")
    s.set_defaults(func=cmd_decode)

    s = sub.add_parser("fnuz", help="OCP FP8 -> AMD FNUZ conversion of safetensors checkpoints")
    fsub = s.add_subparsers(dest="fnuz_command", required=True)
    add_fnuz_convert_arguments(fsub.add_parser("convert", help="convert a .safetensors file or a sharded "
                                                               "checkpoint directory"))
    add_checkpoint_parser(sub)
    add_mma_parser(sub)
    add_compare_parser(sub)

    s = sub.add_parser("gen", help="write golden vectors (TestFloat-style .tv and block binaries)")
    s.add_argument("op", nargs="?", default="all", help="a file name or glob, e.g. 'f32_to_e4m3.rne.*' (default all)")
    s.add_argument("--level", type=int, choices=[1, 2], default=1,
                   help="1 (default): the boundary and random models, as vectors/ holds them; 2: also every "
                        "float16/bfloat16 input and 2^20 random float32 per conversion (hundreds of MB)")
    s.add_argument("--seed", type=argcheck.cli_integer("--seed", low=0), default=1,
                   help="seed of the random inputs and, with --rounding sr, of the random bits written into each "
                        "line ('<input> <rbits> <code> <flags>'; the same seed gives the same files)")
    s.add_argument("-o", "--output", help="directory; without it one .tv file goes to stdout")
    s.add_argument("--operands", action="store_true", help="stdout: operands only (to feed a device)")
    s.add_argument("--list", action="store_true", help="list the file names")
    s.add_argument("--rounding", choices=ROUNDING_MODES,
                   help="with OP like f32_to_e4m3: this rounding mode (sr: random bits from --seed, in the file)")
    s.add_argument("--overflow", choices=OVERFLOW_MODES, help="with OP like f32_to_e4m3: this overflow policy")
    s.add_argument("--profile", choices=list(PROFILES), metavar="NAME",
                   help="with OP like f32_to_e4m3: this profile (fmtsim list profiles)")
    s.set_defaults(func=cmd_gen)

    s = sub.add_parser("ver", help="verify a device's results against a vector file")
    s.add_argument("op", help="the vector file name (as in manifest.json), or 'all', or fmtsim's D.npy (from "
                   "'fmtsim mma matmul -o D.npy') to compare a device's GEMM result against")
    s.add_argument("file", nargs="?", help="the device's results (default: stdin): for a .tv file, text lines as "
                   "the vector file's (CRLF, trailing blanks and lower-case hex accepted; with --ignore-flags the "
                   "flags field may be left out), or a raw array of results in operand order: a .npy file, or one "
                   "byte per code (a file of exactly that size, or named *.bin/.raw/.u8/.u32; decode files: 4 bytes of "
                   "float32 bits per case); arrays have no flags to compare. For a .bin vector file, a file of the "
                   "same layout. With 'all', a directory of result files named as the vectors")
    s.add_argument("--vectors", help="the vectors directory (default: the vectors installed with fmtsim)")
    s.add_argument("--errors", type=argcheck.cli_integer("--errors", low=0), default=20, help="failures printed")
    s.add_argument("--check-nans", action="store_true", help="NaN codes must match exactly")
    s.add_argument("--ignore-flags", action="store_true", help="do not compare flags (GPUs report none)")
    s.add_argument("--family-tolerance", action="store_true",
                   help="*.gemm.bin: accept D within the model-family bound of the exact answer (a device whose "
                        "matrix unit is none of the named ones) instead of bit for bit")
    s.set_defaults(func=cmd_ver)

    s = sub.add_parser("diff", help="what each profile produces on the inputs where implementations disagree")
    s._negative_number_matcher = _NEGATIVE_NUMBER
    s.add_argument("values", nargs="*", help="values to show (default: the built-in divergence set)")
    s.add_argument("--format", help="format for the given values (needed with values; fmtsim list formats)")
    s.add_argument("--src", default="float32", choices=["float32", "float64"],
                   help="source type of the values (default float32)")
    s.add_argument("--profile", action="append", choices=list(PROFILES), metavar="NAME", dest="profiles",
                   help="a profile to show; repeat for several (default all; fmtsim list profiles)")
    s.set_defaults(func=cmd_diff)

    s = sub.add_parser("probe", help="characterise a matrix unit: gen writes operands, infer reads your kernel's D")
    psub = s.add_subparsers(dest="action", required=True)
    g = psub.add_parser("gen", help="write probe.<set>.bin operands and probe.json for a device to run")
    g.add_argument("-o", "--output", required=True, help="the directory to write probe.<set>.bin and probe.json to")
    g.add_argument("--set", nargs="+", help="probe sets (default: all)")
    g.add_argument("--seed", type=argcheck.cli_integer("--seed", low=0), default=7,
                   help="seed of the random rows (default 7; infer reads it from probe.json)")
    g.set_defaults(func=cmd_probe, results=[], probes=None)
    i = psub.add_parser("infer", help="which matrix unit reproduces a device's D (exit 0 only when a named one does)")
    i.add_argument("results", nargs="+", help="result files probe.<set>.d.bin: your kernel's D for that set's "
                   "operands, P rows x NB columns of float32, row-major (probe.json gives P and NB per set)")
    i.add_argument("--set", nargs="+", help="probe sets (default: from the file names)")
    i.add_argument("--probes", help="the directory gen wrote (for its seed; default seed 7)")
    i.set_defaults(func=cmd_probe, output=None, seed=7)

    s = sub.add_parser("conform", help="run the coverage models against implementations")
    s.add_argument("--impl", nargs="+", default=["fmtsim", "ml_dtypes"],
                   help="built-in (fmtsim list implementations; fmtsim env says which run here): "
                        + _implementation_names()
                        + "; or an adapter as module:function or file.py:function (default: fmtsim ml_dtypes). "
                          "With several, one that cannot run here is skipped with the reason")
    s.add_argument("--format", "--formats", nargs="+", dest="formats", metavar="FMT",
                   help="only these formats, and block schemes or matrix units where the implementation has "
                        "them (default: every one it covers; fmtsim list formats)")
    s.add_argument("--quick", action="store_true", help="boundary models only")
    s.add_argument("--vectors", help="golden vector directory (default: the vectors installed with fmtsim)")
    s.add_argument("--profile", choices=list(PROFILES), metavar="NAME",
                   help="fmtsim vs the oracle under this profile; overrides the profile an adapter claims "
                        "(fmtsim list profiles)")
    s.add_argument("--strict", action="store_true",
                   help="exit 1 for failures on an implementation version no profile variant was read off too "
                        "(they are always shown, marked unverified; without --strict only verified ones fail the run)")
    s.set_defaults(func=cmd_conform)

    s = sub.add_parser("env", help="what this machine has for conform: implementations, CPU, compilers, cache",
                       description="Each implementation 'fmtsim conform' knows (its version, or why it cannot "
                                   "run here) and the profile variant it is held to, verified or not; the CPU's "
                                   "instruction sets; the C++ compiler, CUDA, HIP and LLVM found; the build cache.")
    s.add_argument("--impl", nargs="+", metavar="NAME", help="only these implementations (default: every one)")
    s.add_argument("--json", action="store_true", help="the same as JSON, for scripts")
    s.set_defaults(func=cmd_env)

    s = sub.add_parser("list", help="the names an option takes: formats, profiles, rounding, overflow, nan, "
                                    "producers, units, implementations")
    s.add_argument("what", choices=list(LISTS), help="which names: " + ", ".join(LISTS))
    s.set_defaults(func=cmd_list)
    return p


def _list_rows(what: str) -> list[list[str]]:
    if what == "formats":
        from .formats import FORMATS

        return [[name, f.title + (f" (also {', '.join(f.aliases)})" if f.aliases else "")]
                for name, f in FORMATS.items()]
    if what == "profiles":
        from .profiles import select

        rows = []
        for name in PROFILES:
            v = select(name, None, None).variant
            what = v.provenance.read_off + (f"; code path {', '.join(v.code_paths)}" if v.code_paths else "")
            rows.append([name, f"the same as {v.profile}" if v.profile != name else what])
        return rows
    if what == "rounding":
        return [[m, ROUNDING_MODE_TEXT.get(m, "")] for m in ROUNDING_MODES]
    if what == "overflow":
        return [[m, OVERFLOW_MODE_TEXT.get(m, "")] for m in OVERFLOW_MODES]
    if what == "nan":
        return [[m, NAN_MODE_TEXT.get(m, "")] for m in NAN_MODES]
    if what == "producers":
        from .checkpoint.producers import PRODUCERS

        return [[r.name, r.title] for r in PRODUCERS]
    if what == "units":
        from .mma import UNITS

        return [[u.name, u.title] for u in UNITS.values()]
    from .conformance.impls import registry

    return [[i.name, i.summary] for i in registry().values()]


LISTS = ("formats", "profiles", "rounding", "overflow", "nan", "producers", "units", "implementations")


def cmd_list(args: argparse.Namespace) -> int:
    """One name per line with what it is: the values an option with a long list of choices takes."""
    print(_table(_list_rows(args.what), [args.what[:-1] if args.what.endswith("s") else args.what, "what it is"]))
    return 0


def _error_text(e: BaseException) -> str:
    if isinstance(e, OSError) and e.filename is not None and str(e.filename) not in str(e):
        return f"{e.filename}: {e.strerror or e}"
    return str(e) or type(e).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command. Exit status: 0 done, 1 a check failed, 2 bad usage or input (one line
    ``fmtsim: error: ...`` on stderr; a traceback is a bug), 141 when the reader of stdout went
    away (``fmtsim table e4m3 | head``), as a program killed by SIGPIPE reports."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except (UsageError, ValueError, TypeError, OSError) as e:
        if isinstance(e, BrokenPipeError):
            return _broken_pipe()
        print(_one_line(f"fmtsim: error: {_error_text(e)}"), file=sys.stderr)
        return 2
    except MemoryError as e:  # an input too large for this machine: a message, not a traceback
        detail = f" ({e})" if str(e) else ""
        print(_one_line(f"fmtsim: error: not enough memory for this command{detail}: give it smaller inputs"),
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("fmtsim: interrupted", file=sys.stderr)
        return 130


def _broken_pipe() -> int:
    # stdout's reader is gone: point stdout at devnull so the interpreter's final flush is silent
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return 141


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
