"""``fmtsim mma matmul``: one GEMM check of production size from operand files, on output
tiles run by fmtsim.executor (this process, ``--jobs N`` processes, or a Dask cluster)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import argcheck
from ..fileio import check_replaceable
from .arith import IEEE_FORMATS, WIDE_FORMATS, canonical_operand_format
from .compiled import uses_compiled
from .gemm import too_large
from .units import get_unit, unit_names

__all__ = ["add_mma_parser", "cmd_mma_matmul"]


def _ints(text: str, n: int, what: str) -> tuple[int, ...]:
    try:
        vals = tuple(int(v) for v in text.replace("x", ",").split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{what} is {n} whole numbers like 8192,8192,8192, not {text!r}") from None
    if len(vals) != n or min(vals) < 0:
        raise argparse.ArgumentTypeError(f"{what} is {n} non-negative whole numbers, not {text!r}")
    return vals


def add_mma_parser(sub: Any) -> None:
    """Register ``fmtsim mma`` and its subcommands on the top-level subparsers."""
    s = sub.add_parser("mma", help="matrix-unit models: a whole GEMM from operand files")
    msub = s.add_subparsers(dest="mma_command", required=True)
    m = msub.add_parser("matmul", help="D = A @ B + C as a named matrix unit computes it, bit for bit, "
                                       "split into output tiles (--jobs N, --scheduler ADDR)")
    m.add_argument("a", help="A: (M, K) codes of --a-format; .npy, or raw row-major bytes with --shape")
    m.add_argument("b", help="B: (K, N) codes (or (N, K) with --b-nk) of --b-format")
    m.add_argument("c", nargs="?", help="C: (M, N) float32 (float64 for the fp64 units; default zeros)")
    m.add_argument("--unit", required=True, choices=unit_names(), metavar="UNIT",
                   help="the matrix unit (fmtsim list units)")
    m.add_argument("--a-format", required=True, help="A's format: an fmtsim format name (e4m3, e2m1, ...), "
                   "fp16, bf16, tf32, or fp32 / fp64 bit patterns")
    m.add_argument("--b-format", required=True, help="B's format, as --a-format")
    m.add_argument("--a-scales", help="(M, K / block size) scale codes")
    m.add_argument("--b-scales", help="(K / block size, N) scale codes ((N, K / block size) with --b-nk)")
    m.add_argument("--scale-format", choices=["e8m0", "ue4m3"], help="the scale codes' format (block-scaled units)")
    m.add_argument("--block-size", type=argcheck.cli_integer("--block-size", low=1),
                   help="elements of K per scale (block-scaled units: 32, or 16 for NVFP4)")
    m.add_argument("--shape", type=lambda t: _ints(t, 3, "--shape"), metavar="M,N,K",
                   help="the GEMM's shape: needed for raw binary operands, checked for .npy ones")
    m.add_argument("--b-nk", action="store_true", help="B (and its scales) are stored N x K (K contiguous), "
                   "as most kernels keep them")
    m.add_argument("--promote-every", type=argcheck.cli_integer("--promote-every", low=1), metavar="N",
                   help="every N of K the partial sum joins an fp32 accumulator (DeepGEMM: 128; default never)")
    m.add_argument("--split-k", type=argcheck.cli_integer("--split-k", low=1), metavar="S",
                   help="S slices of K chained apart and added in fp32 (default 1)")
    m.add_argument("--k-order", choices=["forward", "reverse"], default="forward",
                   help="the order the kernel walks K's steps in (default forward)")
    m.add_argument("--add-c", choices=["in_chain", "epilogue"], default="in_chain",
                   help="C as the first step's accumulator (in_chain, the default: the instruction takes it) "
                        "or added after the chain in fp32 (epilogue)")
    m.add_argument("-o", "--output", required=True, help="D: .npy, or raw float32 (float64 for the fp64 units) "
                   "for *.bin / *.raw / *.f32 / *.f64")
    run = m.add_mutually_exclusive_group()
    run.add_argument("--jobs", type=argcheck.cli_integer("--jobs", low=1),
                     help="local worker processes (default: this process, tile by tile)")
    run.add_argument("--scheduler", help="a Dask scheduler address, e.g. tcp://host:8786 (needs fmtsim[dask])")
    m.add_argument("--engine", choices=["auto", "compiled", "numpy"], default="auto",
                   help="the NVIDIA, CDNA3 FP8 and FMA-chain units' steps in C++ built on first use "
                        "('compiled'), in numpy, or 'auto' (the default: compiled when it builds); the same bits "
                        "either way")
    m.add_argument("--tile", type=lambda t: _ints(t, 2, "--tile"), metavar="ROWS,COLS",
                   help="output tile (default up to 256,256)")
    m.set_defaults(func=cmd_mma_matmul)


def _progress(total: int) -> tuple[Callable[[int, int], None], Callable[[], None]]:
    """progress(done, total) and close(): a tqdm bar on a terminal, else a line per tenth."""
    if sys.stderr.isatty():
        try:
            from tqdm import tqdm

            bar = tqdm(total=total, unit="product", unit_scale=True, desc="matmul", file=sys.stderr)
            last = [0]

            def update(done: int, _total: int) -> None:
                bar.update(done - last[0])
                last[0] = done
            return update, bar.close
        except Exception:  # no tqdm, or a broken one: no bar
            pass
    t0 = time.perf_counter()
    shown = [0]

    def line(done: int, tot: int) -> None:
        if tot < 10**9:  # seconds of work: no lines
            return
        tenth = done * 10 // max(tot, 1)
        if tenth > shown[0]:
            shown[0] = tenth
            print(f"matmul: {tenth * 10}% of {tot:.3g} products, {time.perf_counter() - t0:.0f} s",
                  file=sys.stderr, flush=True)
    return line, lambda: None


def cmd_mma_matmul(args: argparse.Namespace) -> int:
    from . import matmul
    from .dfiles import read_array, write_d

    af, bf = canonical_operand_format(args.a_format), canonical_operand_format(args.b_format)
    out_dt = get_unit(args.unit).out_dtype
    inputs = (args.a, args.b, args.c, args.a_scales, args.b_scales)
    check_replaceable(args.output, inputs, "-o")  # before the GEMM, not after minutes of it

    def code_dt(f: str) -> Any:  # fp32 / fp64 operands of the fma units: uint32 / uint64 patterns
        return IEEE_FORMATS[f][0] if f in IEEE_FORMATS else np.uint16 if f in WIDE_FORMATS else np.uint8

    def patterns(x: np.ndarray, f: str) -> np.ndarray:
        """A .npy of fp32 / fp64 values for an fma unit: its bit patterns (a view, nothing rounded)."""
        if f in IEEE_FORMATS and x.dtype == IEEE_FORMATS[f][1]:
            return x.view(IEEE_FORMATS[f][0])
        return x
    shape_a: tuple[int, ...] | None = None
    shape_b: tuple[int, ...] | None = None
    if args.shape:
        m, n, k = args.shape
        shape_a, shape_b = (m, k), ((n, k) if args.b_nk else (k, n))
        # refused before any file is read: a size no memory holds ends in numpy's MemoryError
        for what, shape, dt in (("A", shape_a, code_dt(af)), ("B", shape_b, code_dt(bf)), ("D", (m, n), out_dt)):
            why = too_large(shape, dt, what)
            if why is not None:
                raise ValueError(f"--shape {m},{n},{k}: {why}")
    bs = args.block_size
    a = patterns(read_array(args.a, "A", shape_a, code_dt(af)), af)
    b = patterns(read_array(args.b, "B", shape_b, code_dt(bf)), bf)
    if args.b_nk:
        b = b.T
    m, k = a.shape
    n = b.shape[1]
    c = read_array(args.c, "C", (m, n), out_dt) if args.c else None
    sa = sb = None
    if args.a_scales or args.b_scales:
        missing = [opt for opt, v in (("--a-scales", args.a_scales), ("--b-scales", args.b_scales),
                                      ("--scale-format", args.scale_format), ("--block-size", bs)) if v is None]
        if missing:
            raise ValueError(f"block scales need --a-scales, --b-scales, --scale-format and --block-size: "
                             f"{', '.join(missing)} not given")
        # the unit's own block sizes first: a size it does not take would otherwise surface as a
        # scales file of the "wrong" shape, blaming the file for the option
        unit = get_unit(args.unit)
        if not unit.block_sizes:
            raise ValueError(f"unit {unit.name} has no block scales: leave out --a-scales, --b-scales, "
                             f"--scale-format and --block-size")
        if bs not in unit.block_sizes:
            raise ValueError(f"--block-size {bs}: unit {unit.name} takes block size "
                             f"{' or '.join(map(str, unit.block_sizes))}")
        nb = -(-k // bs)
        sa = read_array(args.a_scales, "A scales", (m, nb), np.uint8)
        sb = read_array(args.b_scales, "B scales", (n, nb) if args.b_nk else (nb, n), np.uint8)
        if args.b_nk:
            sb = sb.T
    update, close = _progress(m * n * k)
    t0 = time.perf_counter()
    try:
        d = matmul(a, b, c, unit=args.unit, a_format=af, b_format=bf, a_scales=sa, b_scales=sb,
                   scale_format=args.scale_format, block_size=bs, promote_every=args.promote_every,
                   split_k=args.split_k, jobs=(args.jobs or 1) if args.scheduler is None else None,
                   scheduler=args.scheduler, tile=args.tile, progress=update, engine=args.engine,
                   k_order=args.k_order, add_c=args.add_c)
    finally:
        close()
    wall = time.perf_counter() - t0
    write_d(args.output, d, inputs)
    how = f"Dask {args.scheduler}" if args.scheduler else f"{args.jobs} processes" if args.jobs else "this process"
    engine = "compiled" if uses_compiled(get_unit(args.unit), args.engine) else "numpy"
    print(f"wrote {args.output}: D {m} x {n} {d.dtype}, {args.unit} {af} x {bf}, K={k}, "
          f"{m * n * k:.3g} products in {wall:.1f} s on {how}, {engine} engine "
          f"({wall / max(1, m * n * k) * 1e9:.2f} ns per product)")
    return 0
