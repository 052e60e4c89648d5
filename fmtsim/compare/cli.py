"""``fmtsim compare SOURCE``: which format suits these weights, as a ranked table, CSV and JSON."""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from tabulate import tabulate

from .. import __version__, argcheck
from ..fileio import check_replaceable
from . import DEFAULT_SCHEMES, parse_scheme
from .source import Report, compare_source, iter_rows

__all__ = ["add_compare_parser", "cmd_compare"]

_COLUMNS = ("tensor", "shape", "scheme", "bits_per_weight", "weights", "mse", "sqnr_db", "rel_error",
            "max_abs_error", "zeroed", "clipped", "out_mse", "out_sqnr_db", "kurtosis", "kurtosis_quantized")


def add_compare_parser(sub: Any) -> None:
    s = sub.add_parser(
        "compare", help="which format suits these weights: every scheme's error on a model's tensors, ranked",
        description="Quantize every chosen tensor of SOURCE under each scheme with fmtsim's bit-exact "
                    "quantizers (after a transform where the scheme names one) and rank the schemes by the "
                    "error of all chosen weights together, computed in float64. Scheme grammar: "
                    "'fmtsim compare --help-schemes'.")
    s.add_argument("source", nargs="?", help="a Hugging Face model folder (safetensors, sharded or not), a "
                   ".safetensors file, a GGUF file (its F32/F16/BF16 tensors) or a .npy")
    s.add_argument("--schemes", nargs="+", metavar="SPEC",
                   help="scheme specs, e.g. int4:group=32 e4m3:block=128 mxfp4:rule=even nvfp4:tile=16x16 "
                        "int4+hadamard=64 (default: " + " ".join(DEFAULT_SCHEMES) + ")")
    s.add_argument("--tensors", nargs="+", metavar="GLOB",
                   help="tensor names to compare (fnmatch globs, e.g. '*.mlp.*'); default: every 2-D float "
                        "tensor whose name ends in 'weight'")
    s.add_argument("--activations", metavar="FILE", help="calibration inputs X: a .npy (tokens x features, for "
                   "every weight with that many input features) or a safetensors file of tensors named as the "
                   "weights; adds the output error of X W^T against X W_hat^T")
    s.add_argument("--original", metavar="MODEL", help="SOURCE is a quantized checkpoint (any layout fmtsim "
                   "reads): compare its own quantization, as one more row, with the schemes computed from MODEL, "
                   "the weights it was made from")
    s.add_argument("--per-tensor", action="store_true", help="also print each tensor's rows")
    s.add_argument("--csv", metavar="FILE", help="write every row (each tensor x scheme, then the overall rows) "
                   "as CSV")
    s.add_argument("--json", metavar="FILE", help="write the report as JSON")
    s.add_argument("--plots", metavar="DIR", help="write pareto.png, heatmap.png, histogram.png and clipping.png "
                   "(needs fmtsim[plot]: matplotlib)")
    s.add_argument("--report", metavar="DIR", help="write DIR/index.html: the tables and the figures in one "
                   "self-contained page (needs fmtsim[plot])")
    s.add_argument("--clip-curve", metavar="SPEC", help="the scheme (without a transform) whose clipping U-curve "
                   "is drawn (default: the per-tensor scheme of fewest bits, else the best-ranked one without a "
                   "transform)")
    s.add_argument("--help-schemes", action="store_true", help="print the scheme grammar and exit")
    run = s.add_mutually_exclusive_group()
    run.add_argument("--jobs", type=argcheck.cli_integer("--jobs", low=1),
                     help="tensors in parallel local processes (default: this process)")
    run.add_argument("--scheduler", help="a Dask scheduler address (needs fmtsim[dask])")
    s.set_defaults(func=cmd_compare)


def _progress() -> tuple[Callable[[int, int, str], None], Callable[[], None]]:
    """A tqdm bar on a terminal (when tqdm is there), else on stderr a line per tensor at most
    every 5 seconds (a quick run prints none)."""
    import time

    bar: list[Any] = []
    last = [time.monotonic()]

    def update(done: int, total: int, name: str) -> None:
        if sys.stderr.isatty():
            try:
                from tqdm import tqdm
            except ImportError:
                tqdm = None
            if tqdm is not None:
                if not bar:
                    bar.append(tqdm(total=total, unit="tensor", file=sys.stderr))
                bar[0].update(1)
                bar[0].set_postfix_str(name[-40:])
                return
        now = time.monotonic()
        if total > 1 and done < total and now - last[0] >= 5:
            last[0] = now
            print(f"compare: {done}/{total} tensors, last {name}", file=sys.stderr)

    def close() -> None:
        if bar:
            bar[0].close()
    return update, close


def _fmt_row(r: dict[str, Any], outputs: bool = False) -> list[str]:
    row = [r["scheme"], f"{r['bits_per_weight']:.3f}", f"{r['mse']:.4g}", f"{r['sqnr_db']:.2f}",
           f"{r['rel_error']:.4f}", f"{r['max_abs_error']:.4g}", f"{100 * r['zeroed']:.2f}",
           f"{100 * r['clipped']:.3f}"]
    if outputs:
        row += ["-" if np.isnan(r["out_mse"]) else f"{r['out_mse']:.4g}",
                "-" if np.isnan(r["out_sqnr_db"]) else f"{r['out_sqnr_db']:.2f}"]
    return row


_HEADERS = ["scheme", "bits/w", "MSE", "SQNR dB", "rel err", "max abs", "zeroed %", "clipped %"]
_OUT_HEADERS = ["out MSE", "out SQNR dB"]


def _fit(rows: list[list[str]], heads: list[str], width: int | None) -> str:
    """The table, with the least needed columns left out until it fits ``width`` (a terminal's;
    None: every column): clipped % while nothing was clipped, then rel err (SQNR says the same),
    then max abs. Files (--csv, --json) always hold every column."""
    table = tabulate(rows, heads, disable_numparse=True)
    for name in ("clipped %", "rel err", "max abs"):
        if width is None or max(map(len, table.splitlines())) <= width:
            break
        if name not in heads:
            continue
        i = heads.index(name)
        if name == "clipped %" and any(float(r[i]) > 0 for r in rows):
            continue
        heads = heads[:i] + heads[i + 1:]
        rows = [r[:i] + r[i + 1:] for r in rows]
        table = tabulate(rows, heads, disable_numparse=True)
    return table


def render(report: Report, per_tensor: bool = False, width: int | None = None) -> str:
    n = sum(int(np.prod(t.shape)) for t in report.tensors)
    out = [f"{report.source}: {len(report.tensors)} tensor{'s' * (len(report.tensors) != 1)}, {n:,} weights; "
           f"ranked by MSE over all of them (float64)", ""]
    with_x = [t.name for t in report.tensors if any(v.out_n for v in t.totals.values())]
    if with_x:
        out[0] += (f"; output error X W^T over {len(with_x)} of {len(report.tensors)} tensors (those the "
                   "activations fit)")
    outputs = bool(with_x)
    heads = [*_HEADERS, *(_OUT_HEADERS if outputs else [])]
    rows = [[str(i + 1), *_fmt_row(r, outputs)] for i, r in enumerate(report.overall())]
    out.append(_fit(rows, ["#", *heads], width))
    import textwrap

    for note in report.notes:
        out += ["", textwrap.fill(f"note: {note}", width, subsequent_indent="  ") if width else f"note: {note}"]
    gone = report.not_applicable()
    if gone:
        out += ["", "not ranked (they do not apply to every tensor):"]
        out += [f"  {spec}: {name}: {why}" for spec, (name, why) in gone.items()]
    if per_tensor:
        for tr in report.tensors:
            out += ["", f"{tr.name} ({'x'.join(map(str, tr.shape))} {tr.dtype}, kurtosis {tr.kurtosis:.4g})"]
            trs = sorted(((spec, tr.totals[spec]) for spec in report.schemes if spec in tr.totals),
                         key=lambda p: (p[1].metrics()["mse"], p[0]))
            tr_rows = [_fmt_row({"scheme": spec, "bits_per_weight": t.bits / t.n if t.n else 0.0, **t.metrics()},
                                outputs) for spec, t in trs]
            out.append(_fit(tr_rows, list(heads), width))
    return "\n".join(out)


def to_json(report: Report) -> str:
    doc = {"fmtsim": __version__, "source": report.source, "schemes": list(report.schemes),
           "overall": report.overall(),
           "not_ranked": {spec: {"tensor": name, "why": why} for spec, (name, why) in report.not_applicable().items()},
           "notes": report.notes,
           "tensors": [{"name": t.name, "shape": list(t.shape), "dtype": t.dtype, "kurtosis": t.kurtosis,
                        "rows": [r for r in report.per_tensor() if r["tensor"] == t.name]} for t in report.tensors]}
    return json.dumps(_strict(doc), indent=1, allow_nan=False) + "\n"


def _strict(v: Any) -> Any:
    """JSON has no NaN or Infinity: a metric that does not exist (no activations) is null, an
    infinite SQNR (no error at all) the string "inf"."""
    if isinstance(v, float) and not np.isfinite(v):
        return None if np.isnan(v) else ("inf" if v > 0 else "-inf")
    if isinstance(v, dict):
        return {k: _strict(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_strict(x) for x in v]
    return v


def to_csv(report: Report) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(_COLUMNS), extrasaction="raise", lineterminator="\n")
    w.writeheader()
    for r in iter_rows(report):
        w.writerow({k: r.get(k, "") for k in _COLUMNS})
    return buf.getvalue()


def cmd_compare(args: argparse.Namespace) -> int:
    from ..fileio import atomic_write
    from . import __doc__ as grammar

    if args.help_schemes:
        assert grammar is not None
        text = grammar.split("Scheme spec grammar", 1)[1].split("Symmetric integer scales", 1)[0]
        print("NAME[:OPTION]...[+TRANSFORM]..." + text.split("):", 1)[1].rstrip())
        return 0
    if args.source is None:
        raise ValueError("compare: give SOURCE (a model folder, a .safetensors file or a .npy)")
    schemes = tuple(args.schemes or DEFAULT_SCHEMES)
    for spec in schemes:
        parse_scheme(spec)
    inputs = _inputs(args.source, args.original, args.activations)
    targets: list[tuple[Path, str]] = [(Path(p), w) for p, w in ((args.csv, "--csv"), (args.json, "--json")) if p]
    from .plots import FIGURES

    for d, what in ((args.plots, "--plots"), (args.report, "--report")):
        if d is not None:
            if Path(d).exists() and not Path(d).is_dir():
                raise ValueError(f"{what} {d}: exists and is not a directory")
            targets += [(Path(d) / n, what) for n in (FIGURES if what == "--plots" else ("index.html",))]
    for path, what in targets:  # every output refused before any tensor is read
        check_replaceable(path, inputs, what)
        if what in ("--csv", "--json") and not path.resolve().parent.is_dir():
            raise ValueError(f"{what} {path}: the directory {path.parent} does not exist")
    if args.csv and args.json and Path(args.csv).resolve() == Path(args.json).resolve():
        raise ValueError("--csv and --json name the same file")
    if args.clip_curve is not None and parse_scheme(args.clip_curve).transforms:
        raise ValueError(f"--clip-curve {args.clip_curve}: a scheme without a transform (the curve is the clipping)")
    if args.plots or args.report:
        from .plots import _pyplot

        _pyplot()  # matplotlib missing: said before any tensor is read
    update, close = _progress()
    try:
        report = compare_source(args.source, schemes, args.tensors, jobs=args.jobs, scheduler=args.scheduler,
                                progress=update, activations=args.activations, original=args.original)
    finally:
        close()
    import shutil

    text = render(report, args.per_tensor, shutil.get_terminal_size().columns if sys.stdout.isatty() else None)
    print(text)
    if args.csv:  # the tables first: a figure that fails does not cost them
        atomic_write(args.csv, to_csv(report), inputs, "--csv")
        print(f"wrote {args.csv}")
    if args.json:
        atomic_write(args.json, to_json(report), inputs, "--json")
        print(f"wrote {args.json}")
    if args.plots or args.report:
        from .plots import figures, write_figures, write_report

        figs = figures(report, report.load, args.clip_curve)
        if args.plots:
            for p in write_figures(figs, args.plots, inputs):
                print(f"wrote {p}")
        if args.report:
            print(f"wrote {write_report(report, figs, args.report, inputs, render(report, args.per_tensor))}")
    return 0


def _inputs(*paths: str | None) -> list[Path]:
    """Every file compare may read: each path given and, for a directory, every file in it (its
    shards, index and configs), so that no output can be written over one of them."""
    out: list[Path] = []
    for p in paths:
        if not p:
            continue
        q = Path(p)
        out.append(q)
        if q.is_dir():
            out += [f for f in q.iterdir() if f.is_file()]
            snaps = q / "snapshots"  # a Hugging Face cache entry
            if snaps.is_dir():
                out += [f for f in snaps.rglob("*") if f.is_file()]
    return out
