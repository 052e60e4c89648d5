"""The ``fmtsim checkpoint ...`` subcommands (and ``fmtsim fnuz convert``): argument parsing and
printing only; the work is in the job modules. Errors leave as ``UsageError`` (exit 2)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .. import argcheck
from ..tables import table
from .files import CheckpointError

__all__ = ["add_checkpoint_parser", "add_fnuz_convert_arguments", "cmd_fnuz_convert"]


def _warn_without_safetensors() -> None:
    """Every checkpoint command says so when headers cannot be cross-checked with the safetensors parser."""
    import warnings

    from .files import NO_CROSSCHECK, CrosscheckSkipped, crosscheck_available

    if not crosscheck_available():
        print(f"fmtsim: warning: {NO_CROSSCHECK}", file=sys.stderr)
        warnings.simplefilter("ignore", CrosscheckSkipped)  # said once, here, not again per file


def _usage_error(msg: str) -> Exception:
    from ..cli import UsageError  # imported late: fmtsim.cli imports this module

    return UsageError(msg)


_jobs = argcheck.cli_integer("--jobs", low=1)


def _add_scheduler(c: argparse.ArgumentParser) -> None:
    c.add_argument("--scheduler", metavar="ADDR",
                   help="run the shards on a Dask cluster (fmtsim[dask]), e.g. tcp://host:8786; its workers "
                        "must see the input and output paths (a shared file system)")


def _table(rows: list[list[str]], headers: list[str]) -> str:
    return table(rows, headers, tablefmt="simple")


def add_fnuz_convert_arguments(c: argparse.ArgumentParser) -> None:
    c.add_argument("input", help="a .safetensors file, a sharded checkpoint directory or a Hugging Face cache entry")
    c.add_argument("output", help="output file or directory (an existing directory or a trailing / for a file "
                                  "input writes OUTPUT/<input name>)")
    c.add_argument("--inf", choices=["nan", "max", "ocp_max"], help="what E5M2 +-Inf becomes (required if any)")
    c.add_argument("--allow-unscaled", action="store_true", help="convert FP8 tensors that have no scale")
    c.add_argument("--allow-scale-errors", action="store_true",
                   help="convert even when 'checkpoint inspect' reports a scale error (NaN, Inf, negative, zero "
                        "over non-zero codes); by default they stop the conversion")
    c.add_argument("--keep-scale", action="append", default=[], metavar="PATTERN",
                   help="glob of scale-like tensors to copy unchanged")
    c.add_argument("--double-scale", action="append", default=[], metavar="PATTERN",
                   help="glob of extra scale tensors to double")
    c.add_argument("--dry-run", action="store_true", help="print the plan and every problem found, write nothing")
    c.add_argument("--jobs", type=_jobs, default=1, help="shards converted in parallel processes")
    _add_scheduler(c)
    c.add_argument("--no-verify", action="store_true", help="skip re-reading and checking the output")
    c.set_defaults(func=cmd_fnuz_convert)


def cmd_fnuz_convert(args: argparse.Namespace) -> int:
    _warn_without_safetensors()
    from .conversion import convert

    try:
        s = convert(args.input, args.output, inf=args.inf, allow_unscaled=args.allow_unscaled,
                    keep_scales=tuple(args.keep_scale), double_scales=tuple(args.double_scale),
                    dry_run=args.dry_run, jobs=args.jobs, verify=not args.no_verify, scheduler=args.scheduler,
                    progress=not args.dry_run and sys.stderr.isatty(), allow_scale_errors=args.allow_scale_errors)
    except CheckpointError as e:
        raise _usage_error(str(e)) from None
    p = s.plan
    if s.dry_run:
        print(f"plan for {p.source.path} -> {s.output} (nothing written)")
        rows = []
        for name in sorted(p.where):
            action = p.action(name)
            why = p.fp8.get(name) or p.doubled.get(name) or p.unchanged_scales.get(name, "")
            if action == "fp8":
                why = f"OCP {why} -> FNUZ (bits kept, specials fixed)"
                if name in p.inf_codes:
                    why += f"; {p.inf_codes[name]} Inf code(s)"
            if action != "copy" or name in p.unchanged_scales:
                rows.append([name, p.where[name].name, action, why])
        print(_table(rows, ["tensor", "shard", "action", "why"]))
        print(f"\n{_count(len(p.fp8), 'FP8 tensor')} converted, {_count(len(p.doubled), 'scale')} doubled, "
              f"{_count(len(p.where) - len(p.fp8) - len(p.doubled), 'tensor')} copied, {p.total_bytes} bytes in "
              f"{_count(len(p.shards), 'file')}")
        for n in s.notes:
            print(f"NOTE: {n}")
        if p.unscaled and p.options["allow_unscaled"]:
            print(f"WARNING: {len(p.unscaled)} FP8 tensor(s) without a scale will halve in value: "
                  + ", ".join(p.unscaled[:10]))
        for prob in p.problems:
            print(f"PROBLEM: {prob}")
        return 1 if p.problems else 0
    rows = []
    for r in s.shards:
        status = "skipped (already converted, re-verified)" if r.skipped else (
            f"converted again: {r.redone}" if r.redone else "converted")
        rows.append([r.shard, status, str(r.tensors), str(r.bytes), str(r.fp8_tensors), str(r.neg_zero), str(r.nan),
                     str(r.inf), str(r.scales_doubled), "yes" if r.verified else "no", f"{r.seconds:.2f}"])
    t = s.totals()
    rows.append(["total", "", str(t["tensors"]), str(t["bytes"]), str(t["fp8_tensors"]), str(t["neg_zero"]),
                 str(t["nan"]), str(t["inf"]), str(t["scales_doubled"]), "", f"{s.seconds:.2f}"])
    print(_table(rows, ["file", "status", "tensors", "bytes", "fp8", "-0 fixed", "NaN fixed", "Inf fixed",
                        "scales x2", "verified", "s"]))
    for n in s.notes:
        print(f"NOTE: {n}")
    for err in p.scale_errors:
        print(f"WARNING: converted with a scale error (--allow-scale-errors): {err}")
    if p.unscaled:
        print(f"WARNING: {len(p.unscaled)} FP8 tensor(s) had no scale; their values are now half: "
              + ", ".join(p.unscaled[:10]))
    if not p.fp8:
        print(f"NOTE: {p.source.path} has no OCP FP8 tensor (F8_E4M3/F8_E5M2): the output is a copy")
    return 0


def _gguf_convert(args: argparse.Namespace, gguf_input: bool) -> int:
    """--to mxfp4 of a GGUF file, and --to gguf of a gpt-oss MXFP4 checkpoint: the codes moved, not changed."""
    from .gguf_convert import gguf_to_safetensors_mxfp4, safetensors_to_gguf_mxfp4

    others = [flag for flag, on in (("--inf", args.inf), ("--allow-unscaled", args.allow_unscaled),
                                    ("--keep-scale", args.keep_scale), ("--double-scale", args.double_scale),
                                    ("--no-verify", args.no_verify), ("--jobs", args.jobs != 1),
                                    ("--scheduler", args.scheduler), ("--allow-scale-errors", args.allow_scale_errors),
                                    ("--dry-run", args.dry_run), ("--producer", args.producer),
                                    ("--require-exact", args.require_exact)) if on]
    if others:
        raise _usage_error(f"{', '.join(others)}: not for a GGUF <-> safetensors MXFP4 conversion (it moves the "
                           "codes between the layouts, exactly, and always reads its output back)")
    try:
        s = gguf_to_safetensors_mxfp4(args.input, args.output) if gguf_input else \
            safetensors_to_gguf_mxfp4(args.input, args.output)
    except CheckpointError as e:
        raise _usage_error(str(e)) from None
    what = "GGUF -> safetensors (gpt-oss MXFP4 layout)" if gguf_input else "safetensors (gpt-oss MXFP4) -> GGUF"
    print(f"{s.source} -> {s.output}: {what}; {_count(s.mxfp4, 'MXFP4 tensor')} moved code for code (read back "
          f"and compared)" + (f", {_count(s.dequantized, 'other quantized tensor')} written as ggml's float32 "
                              "values" if s.dequantized else "") + f", {_count(s.copied, 'plain tensor')} copied")
    _print_notes(s.notes)
    return 0


def cmd_checkpoint_convert(args: argparse.Namespace) -> int:
    gguf_input = _gguf_input(args.input)
    if args.to == "gguf" or gguf_input:
        if gguf_input and args.to != "mxfp4":
            raise _usage_error(f"{args.input} is a GGUF file: convert reads it with --to mxfp4 (its MXFP4 tensors "
                               "into gpt-oss's safetensors layout); for plain BF16/F32 safetensors use "
                               "'fmtsim checkpoint dequantize'")
        if not gguf_input and args.to == "gguf":
            return _gguf_convert(args, False)
        return _gguf_convert(args, True)
    if args.to == "fnuz":
        if args.require_exact or args.producer:
            raise _usage_error("--require-exact and --producer are for --to nvfp4|mxfp4|fp8-block|mxfp8 (the FNUZ "
                               "conversion is exact by construction and finds its tensors by name)")
        return cmd_fnuz_convert(args)
    from .recast import recast

    _warn_without_safetensors()

    fnuz_only = [flag for flag, on in (("--inf", args.inf), ("--allow-unscaled", args.allow_unscaled),
                                       ("--keep-scale", args.keep_scale), ("--double-scale", args.double_scale),
                                       ("--no-verify", args.no_verify), ("--jobs", args.jobs != 1),
                                       ("--scheduler", args.scheduler),
                                       ("--allow-scale-errors", args.allow_scale_errors)) if on]
    if fnuz_only:
        raise _usage_error(f"{', '.join(fnuz_only)}: only for --to fnuz")
    try:
        s = recast(args.input, args.output, to=args.to, require_exact=args.require_exact, dry_run=args.dry_run,
                   producer=args.producer)
    except CheckpointError as e:
        raise _usage_error(str(e)) from None
    rows = []
    for t in s.tensors:
        ex = t.example
        where = "" if ex is None else ", ".join(f"{k} {v}" for k, v in ex.items() if k not in ("source", "target"))
        rows.append([t.tensor, f"{t.exact} of {t.blocks}", f"{t.max_abs_error:.6g}",
                     "" if ex is None else f"{where}: {ex['source']!r} -> {ex['target']!r}"])
    print(_table(rows, ["tensor", "exact blocks", "largest error", "example (worst block)"]))
    state = f"written to {s.output}" if s.written else "nothing written"
    print(f"\n{sum(t.exact for t in s.tensors)} of {sum(t.blocks for t in s.tensors)} block(s) exact in {s.target}; "
          f"{state}")
    for n in s.notes:
        print(f"NOTE: {n}")
    return 1 if (args.require_exact and s.lossy) else 0


def add_checkpoint_parser(sub: Any) -> None:
    """Register ``fmtsim checkpoint`` and its subcommands on the top-level subparsers."""
    from .producers import PRODUCERS

    s = sub.add_parser("checkpoint", help="quantized checkpoints (safetensors folders and files, GGUF): inspect, "
                                         "dequantize, convert, explain, diff")
    csub = s.add_subparsers(dest="checkpoint_command", required=True)
    c = csub.add_parser("convert", help="convert between formats: OCP FP8 -> FNUZ (as 'fmtsim fnuz convert'), "
                                        "MXFP4 <-> NVFP4, MXFP4 -> block FP8, FP8 -> MXFP8, with a loss report; "
                                        "GGUF MXFP4 <-> gpt-oss safetensors MXFP4")
    c.add_argument("--to", choices=["fnuz", "nvfp4", "mxfp4", "fp8-block", "mxfp8", "gguf"], default="fnuz",
                   help="target format (default fnuz); a .gguf input takes mxfp4 (gpt-oss's safetensors layout), "
                        "gguf writes a gpt-oss MXFP4 checkpoint as a GGUF file")
    c.add_argument("--require-exact", action="store_true", help="write nothing if any block would lose information")
    c.add_argument("--producer", choices=[p.name for p in PRODUCERS], metavar="NAME",
                   help="use this producer record for the input; skip detection (fmtsim list producers)")
    add_fnuz_convert_arguments(c)
    c.set_defaults(func=cmd_checkpoint_convert)
    _add_dequantize(csub)
    _add_inspect(csub)
    _add_explain_diff(csub)


def _gguf_input(path: str) -> bool:
    from .gguf import is_gguf

    return is_gguf(path)


def _print_notes(notes: list[str]) -> None:
    for n in notes:
        print(f"NOTE: {n}")


def cmd_dequantize_gguf(args: argparse.Namespace) -> int:
    from .gguf import dequantize_gguf

    refused = [flag for flag, on in (("--producer", args.producer), ("--jobs", args.jobs != 1),
                                     ("--scheduler", args.scheduler), ("--arithmetic", args.arithmetic != "exact"))
               if on]
    if refused:
        raise _usage_error(f"{', '.join(refused)}: not for a GGUF file (one file, read in one process, its tensor "
                           "types naming their own layout and arithmetic)")
    try:
        s = dequantize_gguf(args.input, args.output, dtype=args.dtype, progress=sys.stderr.isatty())
    except CheckpointError as e:
        raise _usage_error(str(e)) from None
    print(f"{s.source} -> {s.output}: {_count(s.dequantized, 'quantized tensor')} dequantized as ggml's reference "
          f"C does (float32)" + (f", rounded once to {s.target} ({s.rounded} value(s) changed by it)"
                                 if s.target != "float32" else "")
          + f"; {_count(s.copied, 'plain tensor')} copied unchanged")
    if s.nan:
        print(f"WARNING: {s.nan} NaN value(s): NaN or Inf block scales in the file, as ggml reads them")
    _print_notes(s.notes)
    return 0


def cmd_inspect_gguf(args: argparse.Namespace) -> int:
    import json

    from .gguf import inspect_gguf

    if args.producer:
        raise _usage_error("--producer: not for a GGUF file (its tensor types name themselves)")
    try:
        r = inspect_gguf(args.input)
    except CheckpointError as e:
        raise _usage_error(str(e)) from None
    if args.json:
        print(json.dumps(r.as_dict(), indent=2))
        return 0
    declared = r.preset or "not declared (no general.file_type)"
    print(f"{r.path}: GGUF v{r.version}, architecture {r.architecture or '?'}; llama.cpp preset {declared}; "
          f"bulk of the weights in {r.dominant or '-'}")
    total = sum(v[2] for v in r.mix.values()) or 1
    rows = [[name, str(n), f"{el:,}", f"{nbytes:,}", f"{100 * nbytes / total:.1f}%",
             f"{nbytes * 8 / el:.4g}" if el else "-"] for name, (n, el, nbytes) in r.mix.items()]
    print(_table(rows, ["ggml type", "tensors", "elements", "bytes", "share", "bits/weight"]))
    for f in r.findings:
        print(f"WARNING: {f}")
    _print_notes(r.notes)
    print(f"\n{_count(len(r.tensors), 'tensor')}, {_count(sum(t.quantized for t in r.tensors), 'quantized tensor')}, "
          f"{_count(len(r.findings), 'warning')}")
    return 0


def cmd_dequantize(args: argparse.Namespace) -> int:
    if _gguf_input(args.input):
        return cmd_dequantize_gguf(args)
    _warn_without_safetensors()
    from .dequant import dequantize

    try:
        s = dequantize(args.input, args.output, dtype=args.dtype, producer=args.producer, jobs=args.jobs,
                       progress=sys.stderr.isatty(), scheduler=args.scheduler, arithmetic=args.arithmetic)
    except CheckpointError as e:
        raise _usage_error(str(e)) from None
    rows = []
    for r in s.shards:
        status = "skipped (already done, hash checked)" if r.skipped else (
            f"done again: {r.redone}" if r.redone else "done")
        rows.append([r.shard, status, str(r.dequantized), str(r.dropped), str(r.bytes_in), str(r.bytes_out),
                     str(r.values), str(r.rounded), str(r.overflow), str(r.nan), f"{r.seconds:.2f}"])
    t = s.totals()
    rows.append(["total", "", str(t["dequantized"]), str(t["dropped"]), str(t["bytes_in"]), str(t["bytes_out"]),
                 str(t["values"]), str(t["rounded"]), str(t["overflow"]), str(t["nan"]), f"{s.seconds:.2f}"])
    producers = ", ".join(f"{k} ({_count(v, 'tensor')})" for k, v in sorted(s.detection.producers.items()))
    how = (f"every value the exact product rounded once to {s.target}" if args.arithmetic == "exact" else
           f"each value as its library computes it (its own roundings), in {s.target}")
    print(f"{s.source.path} -> {s.output}: {producers}; {how}")
    print(_table(rows, ["file", "status", "dequantized", "dropped", "bytes in", "bytes out", "values",
                        "rounded (f32)", "overflow", "NaN", "s"]))
    for n in s.notes:
        print(f"NOTE: {n}")
    return 0


def _add_dequantize(csub: Any) -> None:
    from .dequant import TARGETS
    from .producers import PRODUCERS

    c = csub.add_parser("dequantize", help="quantized checkpoint -> BF16/F16/F32, every value exact then rounded once")
    c.add_argument("input", help="a .safetensors file, a sharded checkpoint directory, a Hugging Face cache entry "
                                 "or a .gguf file")
    c.add_argument("output", help="output file or directory")
    c.add_argument("--dtype", choices=list(TARGETS), default="bfloat16",
                   help="the output's float type: each value the exact product rounded once into it "
                        "(default bfloat16)")
    c.add_argument("--arithmetic", choices=["exact", "library"], default="exact",
                   help="exact (default): every value exact, rounded once; library: where the producing "
                        "library rounds in between (optimum-quanto qint4/qint2, HQQ, torchao NVFP4, gptqmodel "
                        "in bfloat16) or misreads (bitsandbytes' CPU 4-bit kernel on rows that are not whole "
                        "blocks), its own arithmetic, so the output is its bits")
    c.add_argument("--producer", choices=[p.name for p in PRODUCERS], metavar="NAME",
                   help="use this record; skip detection (fmtsim list producers)")
    c.add_argument("--jobs", type=_jobs, default=1, help="shards in parallel processes")
    _add_scheduler(c)
    c.set_defaults(func=cmd_dequantize)


def _fmt_num(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def cmd_inspect(args: argparse.Namespace) -> int:
    if _gguf_input(args.input):
        return cmd_inspect_gguf(args)
    _warn_without_safetensors()
    import json

    from .inspection import inspect

    try:
        r = inspect(args.input, producer=args.producer)
    except CheckpointError as e:
        raise _usage_error(str(e)) from None
    if args.json:
        print(json.dumps(r.as_dict(), indent=2))
        return 1 if r.errors else 0
    marked = ", ".join(r.config_producers) or "none"
    print(f"{r.path}: config files name {marked}; tensors: "
          + (", ".join(f"{k} x{v}" for k, v in sorted(r.producers.items())) or "no quantized tensor found"))
    rows = []
    for t in r.tensors:
        c, s = t.codes, t.scales
        rows.append([t.tensor, t.producer, f"{t.scheme} {t.element}", "x".join(map(str, t.shape)),
                     _fmt_num(c.get("nan_codes")), _fmt_num(c.get("neg_zero")),
                     f"{100 * c['at_max_share']:.2f}%" if "at_max_share" in c else "-", _fmt_num(c.get("subnormal")),
                     _fmt_num(c.get("unused_codes")),
                     f"{_fmt_num(s.get('min'))} .. {_fmt_num(s.get('max'))}",
                     _fmt_num(s.get("global")), str(len(t.findings))])
    if rows:
        print(_table(rows, ["tensor", "producer", "scheme", "shape", "NaN", "-0", "at max", "subnormal",
                            "unused codes", "scales (min .. max)", "global", "findings"]))
    if r.findings:
        print()
        print(_table([[f.severity, f.code, f.tensor, f.message] for f in r.findings],
                     ["severity", "finding", "tensor", "what"]))
    n_warn = len(r.findings) - r.errors
    print(f"\n{len(r.tensors)} quantized tensor(s), {r.errors} error(s), {n_warn} warning(s)")
    return 1 if r.errors else 0


def _add_inspect(csub: Any) -> None:
    from .producers import PRODUCERS

    c = csub.add_parser("inspect", help="producer and scheme per layer, code and scale statistics, lint findings")
    c.add_argument("input", help="a .safetensors file, a sharded checkpoint directory, a Hugging Face cache entry "
                                 "or a .gguf file (its type mix and llama.cpp preset)")
    c.add_argument("--producer", choices=[p.name for p in PRODUCERS], metavar="NAME",
                   help="use this record; skip detection (fmtsim list producers)")
    c.add_argument("--json", action="store_true", help="machine-readable report")
    c.set_defaults(func=cmd_inspect)


def cmd_explain(args: argparse.Namespace) -> int:
    gguf_input = _gguf_input(args.input)
    if gguf_input and args.producer:
        raise _usage_error("--producer: not for a GGUF file (its tensor types name themselves)")
    if not gguf_input:
        _warn_without_safetensors()
    from .explain import explain
    from .gguf import explain_gguf

    try:
        rows = explain_gguf(args.input, args.original) if gguf_input else \
            explain(args.input, args.original, producer=args.producer)
    except CheckpointError as e:
        raise _usage_error(str(e)) from None
    table = [[r.tensor, r.producer, r.best, f"{r.by_recipe.get(r.best.split(' = ')[0], 0)} of {r.blocks}"
              if r.blocks else "not compared", str(r.unexplained) if r.blocks else "-"] for r in rows]
    print(_table(table, ["tensor", "producer", "recipe (most blocks)", "blocks explained", "unexplained"]))
    for r in rows:
        others = ", ".join(f"{k}: {v}" for k, v in r.by_recipe.items() if k not in r.best.split(" = "))
        if others:
            print(f"  {r.tensor}: other recipes explain {others}")
        for n in r.notes if r.blocks else ():  # an unexamined tensor's notes are its NOT EXAMINED line below
            print(f"  {r.tensor}: {n}")
        for m in r.misses:
            where = m.detail if m.detail is not None else \
                f"element {m.element}: expected code 0x{m.expected_code:02X}, found 0x{m.found_code:02X}" \
                if m.element is not None and m.expected_code is not None and m.found_code is not None else \
                "codes as expected"
            print(f"  UNEXPLAINED {r.tensor} block {m.block}: {m.recipe} expects scale {m.expected_scale}, "
                  f"found {m.found_scale}; {where}")
        if r.unexplained > len(r.misses):
            print(f"  ... and {r.unexplained - len(r.misses)} more unexplained block(s) in {r.tensor}")
    # a tensor with no block compared ("0 of 0": no recipe, or absent from the original) is not explained
    unexamined = [r for r in rows if not r.blocks]
    for r in unexamined:
        print(f"  NOT EXAMINED {r.tensor}: " + ("; ".join(r.notes) or "no block compared"))
    if unexamined:
        print(f"{len(unexamined)} of {len(rows)} quantized tensor(s) not examined: nothing says which recipe made "
              "them")
    return 1 if any(r.unexplained for r in rows) or unexamined else 0


def cmd_diff_gguf(args: argparse.Namespace) -> int:
    from .gguf import diff_gguf, is_gguf

    if not (is_gguf(args.a) and is_gguf(args.b)):
        raise _usage_error("diff compares two GGUF files, or two safetensors checkpoints; not one of each "
                           "(dequantize the GGUF first: 'fmtsim checkpoint dequantize')")
    if args.original or args.producer:
        raise _usage_error("--original / --producer: not for two GGUF files ('fmtsim checkpoint explain A.gguf "
                           "--original F16.gguf' names the recipe)")
    try:
        rows, notes = diff_gguf(args.a, args.b)
    except CheckpointError as e:
        raise _usage_error(str(e)) from None
    for d in rows:
        kind = d.types[0] if d.types[0] == d.types[1] else f"{d.types[0]} in A, {d.types[1]} in B"
        blocks = f"{d.blocks_differ} of {_count(d.blocks, 'block')} differ ({_share(d.blocks_differ, d.blocks)}), " \
            if d.blocks else ""
        print(f"{d.tensor} ({kind}): {blocks}{d.values_differ} of {_count(d.values, 'value')} differ "
              f"({_share(d.values_differ, d.values)})"
              + (f", first at flat index {d.first}, largest difference {d.largest:.6g}" if d.values_differ else ""))
    _print_notes(notes)
    differ = any(d.values_differ or d.blocks_differ for d in rows)
    return 1 if differ and not args.exit_zero else 0


def cmd_diff(args: argparse.Namespace) -> int:
    if _gguf_input(args.a) or _gguf_input(args.b):
        return cmd_diff_gguf(args)
    _warn_without_safetensors()
    from .explain import diff

    try:
        rows = diff(args.a, args.b, original=args.original, producer=args.producer)
    except CheckpointError as e:
        raise _usage_error(str(e)) from None
    unit = {"e8m0": "E8M0 step", "ue4m3": "UE4M3 code step"}
    for d in rows:
        print(f"{d.tensor}: {d.scales_differ} of {_count(d.scales, 'scale')} differ "
              f"({_share(d.scales_differ, d.scales)}), {d.codes_differ} of {_count(d.codes, 'element code')} "
              f"differ ({_share(d.codes_differ, d.codes)})"
              + (f", first at {d.first_code_diff}" if d.first_code_diff else ""))
        for step, n in sorted(d.steps.items(), key=lambda kv: -kv[1]):
            u = unit.get(d.scale_format, "eighth of a binade")
            direction = "higher" if step > 0 else "lower"
            print(f"    {n} of {_count(d.scales, 'scale')} ({_share(n, d.scales)}) "
                  f"{'is' if n == 1 else 'are'} {_count(abs(step), u)} {direction} in B")
        if d.compared_as:
            print(f"    {d.compared_as}")
        if d.recipes:
            print(f"    A follows {d.recipes['A']}; B follows {d.recipes['B']}")
    differ = any(d.scales_differ or d.codes_differ for d in rows)
    return 1 if differ and not args.exit_zero else 0


def _count(n: int, noun: str) -> str:
    """'1 tensor', '2 tensors'; '1 eighth of a binade', '3 eighths of a binade'."""
    if n == 1:
        return f"{n} {noun}"
    head, sep, tail = noun.partition(" of ")
    return f"{n} {head}s{sep}{tail}"


def _share(n: int, total: int) -> str:
    """n / total as a percentage that is never '0.0%' for a nonzero n nor '100.0%' short of all."""
    if total <= 0 or n == 0:
        return "0%"
    if n == total:
        return "100%"
    p = 100 * n / total
    digits = 1
    while float(f"{p:.{digits}f}") in (0.0, 100.0):  # 1 of 4800 is 0.02%, not 0.0%
        digits += 1
    return f"{p:.{digits}f}%"


def _add_explain_diff(csub: Any) -> None:
    from .producers import PRODUCERS

    names = [p.name for p in PRODUCERS]
    c = csub.add_parser("explain", help="name the recipe (scale rule, rounding) that made each quantized tensor")
    c.add_argument("input", help="the quantized checkpoint (a folder, a .safetensors file or a GGUF file)")
    c.add_argument("--original", required=True, help="the high-precision weights it came from (for a GGUF: a "
                   "GGUF of F32/F16/BF16 tensors, as llama-quantize reads, or safetensors with the same names)")
    c.add_argument("--producer", choices=names, metavar="NAME",
                   help="use this record; skip detection (fmtsim list producers)")
    c.set_defaults(func=cmd_explain)
    c = csub.add_parser("diff", help="two quantizations of the same weights: scale steps and element codes")
    c.add_argument("a", help="one quantized checkpoint (file or folder), or a GGUF file")
    c.add_argument("b", help="the other: the same weights quantized again (another recipe, an FNUZ conversion; "
                             "a GGUF file for a GGUF A)")
    c.add_argument("--original", help="the high-precision weights: say which recipe each follows")
    c.add_argument("--producer", choices=names, metavar="NAME",
                   help="use this record; skip detection (fmtsim list producers)")
    c.add_argument("--exit-zero", action="store_true", help="exit 0 even when scales or codes differ (default: "
                   "exit 1 on any difference, 0 when the two are the same, 2 for bad input)")
    c.set_defaults(func=cmd_diff)
