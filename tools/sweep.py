#!/usr/bin/env python3
"""Exhaustive check: every one of the 2^32 float32 bit patterns, encoded by fmtsim,
against (a) the exact oracle's threshold table and (b) a peer: ml_dtypes, PyTorch's
casts or torchao's FP4/FP6 casts.

    python tools/sweep.py e4m3 [--rounding rne] [--overflow nonsat] [--no-peer]
    python tools/sweep.py all                  # every format ml_dtypes has, its profile
    python tools/sweep.py all --peer torch     # PyTorch's FP8/E8M0 casts, the torch profile
    python tools/sweep.py all --peer torchao   # torchao's FP4/FP6 casts, the torchao profile
    python tools/sweep.py e4m3 --jobs 2        # input ranges on 2 local processes
    python tools/sweep.py all --scheduler tcp://host:8786   # ... or on a Dask cluster

    python tools/sweep.py cuda                 # NVIDIA's host conversions, every entry point
    python tools/sweep.py cuda --entry e8m0:satfinite:rup --start 0x0 --stop 0x80000000

``cuda`` compiles fmtsim's shim against the CUDA headers on the machine (see
fmtsim.conformance.impls.cuda) and compares every float32 pattern of ``--start`` ..
``--stop`` (default: all 2^32) with ``encode(x, fmt, profile="cuda", overflow=...,
rounding=...)``, one entry point (format, overflow, rounding) after another, printing
progress per 1/16 of the range.

The oracle threshold table is built independently of the fast path: for each
sign the exact oracle (fmtsim.oracle, rational arithmetic) is bisected over the
bit patterns to find every pattern where its answer changes (its answer is
monotone in the value, so each code owns one run of patterns). Every pattern is
then looked up in that table. The peer is compared under fmtsim's profile of the
same name, and its known divergences (the implementation's own) are counted
by name. Not run in CI: it takes minutes per format.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from functools import cache

import numpy as np

import fmtsim
from fmtsim.conformance.divergences import explain
from fmtsim.executor import get_executor
from fmtsim.oracle import encode_one
from fmtsim.policy import resolve

TOTAL = 1 << 32


def _f32(p: int) -> float:
    return float(np.array([p], dtype=np.uint32).view(np.float32)[0])


def oracle_threshold_table(fmt: str, rounding: str, overflow: str, nan: str) -> tuple[np.ndarray, np.ndarray]:
    """(run starts, codes): pattern p encodes to codes[searchsorted(starts, p, 'right') - 1]."""
    starts: list[int] = []
    codes: list[int] = []

    def oracle(p: int) -> int:  # NaN patterns too: nan='payload_rounded' reads the payload
        return encode_one(_f32(p), fmt, rounding, overflow, nan, src="float32",
                          negative_nan=bool(p >> 31), nan_bits32=p)[0]

    for sign in (0, 1 << 31):
        lo, end = sign, sign | 0x7FFFFFFF  # finite, Inf, then the NaNs (monotone in payload)
        while lo <= end:
            c = oracle(lo)
            starts.append(lo)
            codes.append(c)
            # largest q in [lo, end] with oracle(q) == c: gallop then bisect
            step = 1
            good = lo
            while good + step <= end and oracle(good + step) == c:
                good += step
                step *= 2
            bad = min(good + step, end + 1)
            while bad - good > 1:
                mid = (good + bad) // 2
                if oracle(mid) == c:
                    good = mid
                else:
                    bad = mid
            lo = good + 1
    return np.array(starts, dtype=np.uint64), np.array(codes, dtype=np.uint8)


def _peer_encoder(peer: str, fmt: str) -> Callable[[np.ndarray], np.ndarray] | None:
    f = fmtsim.get_format(fmt)
    if peer == "ml_dtypes":
        # numpy's float -> integer casts truncate and wrap: nothing to compare for integer formats
        if f.ml_dtype is None or f.kind != "float":
            return None

        def cast(x: np.ndarray) -> np.ndarray:
            with np.errstate(invalid="ignore", over="ignore"):
                return x.astype(f.ml_dtype).view(np.uint8)
        return cast
    from fmtsim.conformance.impls.torch import torch_adapter
    from fmtsim.conformance.impls.torchao import torchao_adapter

    adapter = torch_adapter() if peer == "torch" else torchao_adapter()
    if adapter.formats is None or fmt not in adapter.formats:
        return None
    return lambda x: adapter.encode(x, fmt)


@cache
def _cached_peer(peer: str, fmt: str) -> Callable[[np.ndarray], np.ndarray] | None:
    return _peer_encoder(peer, fmt)


def _sweep_range(piece: tuple) -> tuple[int, int, dict[str, int], list[str]]:
    """One input range [lo, hi) of a sweep (run by the executor, possibly in another process):
    (mismatches vs oracle, unexplained mismatches vs peer, known divergences, examples)."""
    fmt, rounding, overflow, nan, peer, starts, codes, lo, hi = piece
    peer_encode = _cached_peer(peer, fmt) if peer else None
    pats = np.arange(lo, hi, dtype=np.uint64)
    x = pats.astype(np.uint32).view(np.float32)
    ours = fmtsim.encode(x, fmt, rounding=rounding, overflow=overflow, nan=nan)
    want = codes[np.searchsorted(starts, pats, side="right") - 1]
    bad = ours != want
    mism_oracle, mism_peer = int(bad.sum()), 0
    examples = [f"pattern {int(pats[i]):#010x}: fmtsim {ours[i]:#x}, oracle {want[i]:#x}"
                for i in np.nonzero(bad)[0][:3]]
    known: dict[str, int] = {}
    if peer_encode is not None:
        diff = ours != peer_encode(x)
        if diff.any():
            covered = np.zeros_like(diff)
            for name, mask in explain(str(peer), fmt, "float32", x).items():
                known[name] = known.get(name, 0) + int((diff & mask).sum())
                covered |= mask
            mism_peer = int((diff & ~covered).sum())
    return mism_oracle, mism_peer, known, examples


def sweep(fmt: str, rounding: str, overflow: str, nan: str | None, peer: str | None, chunk: int,
          progress: bool = True, jobs: int | None = None, scheduler: object = None,
          start: int = 0, stop: int = TOTAL) -> dict[str, object]:
    """Every pattern in [start, stop) (default all 2^32), split into input ranges of ``chunk``
    patterns run by fmtsim.executor (``jobs`` local processes or a Dask ``scheduler``)."""
    pol = resolve(fmt, rounding, overflow, nan)
    t0 = time.perf_counter()
    starts, codes = oracle_threshold_table(fmt, pol.rounding, pol.on_overflow.mode, pol.on_nan.mode)
    t_table = time.perf_counter() - t0
    has_peer = bool(peer) and _peer_encoder(str(peer), fmt) is not None
    bar = None
    if progress:
        try:
            from tqdm import tqdm

            bar = tqdm(total=stop - start, unit="pat", unit_scale=True, desc=f"{fmt} {pol.rounding}")
        except ImportError:
            bar = None
    mism_oracle = 0
    mism_ml = 0
    known: dict[str, int] = {}
    examples: list[str] = []
    pieces = [(fmt, pol.rounding, pol.on_overflow.mode, pol.on_nan.mode, peer if has_peer else None, starts, codes,
               lo, min(stop, lo + chunk)) for lo in range(start, stop, chunk)]
    with get_executor(jobs, scheduler, pieces=len(pieces)) as ex:
        for i, (mo, mp, kn, ex_lines) in enumerate(ex.imap(_sweep_range, pieces)):
            mism_oracle += mo
            mism_ml += mp
            for name, v in kn.items():
                known[name] = known.get(name, 0) + v
            examples.extend(ex_lines)
            if bar is not None:
                bar.update(pieces[i][-1] - pieces[i][-2])
            elif progress and i % 16 == 0:
                print(f"  {fmt}: {(pieces[i][-1] - start) / (stop - start):.0%}", file=sys.stderr, flush=True)
    if bar is not None:
        bar.close()
    return {
        "format": fmt, "rounding": pol.rounding, "overflow": pol.on_overflow.mode, "nan": pol.on_nan.mode,
        "patterns": stop - start, "runs in oracle table": len(starts), "oracle table s": round(t_table, 1),
        "mismatches vs oracle": mism_oracle,
        "peer": peer if has_peer else "-",
        "mismatches vs peer (unexplained)": mism_ml if has_peer else "-",
        "known peer divergences": "; ".join(f"{k}: {v}" for k, v in known.items()) or "-",
        "wall s": round(time.perf_counter() - t0, 1), "examples": examples[:3],
    }


def sweep_cuda(entry: tuple[str, str, str], start: int, stop: int, chunk: int,
               progress: bool = True) -> dict[str, object]:
    """NVIDIA's float32 conversion for one entry point against the cuda profile, patterns start..stop-1."""
    from fmtsim.conformance.divergences import explain
    from fmtsim.conformance.impls import cuda

    fmt, ov, rm = entry
    t0 = time.perf_counter()
    diffs = 0
    known: dict[str, int] = {}
    examples: list[str] = []
    span = max(stop - start, 1)
    next_report = start
    for base in range(start, stop, chunk):
        pats = np.arange(base, min(base + chunk, stop), dtype=np.uint64)
        x = pats.astype(np.uint32).view(np.float32)
        theirs = cuda.vendor_encode(x, fmt, ov, rm)
        ours = np.asarray(fmtsim.encode(x, fmt, profile="cuda", overflow=ov, rounding=rm), np.uint8)
        bad = ours != theirs
        if bad.any():
            covered = np.zeros_like(bad)
            for name, mask in explain("cuda", fmt, "float32", x).items():
                known[name] = known.get(name, 0) + int((bad & mask).sum())
                covered |= mask
            un = bad & ~covered
            diffs += int(un.sum())
            for i in np.nonzero(un)[0][: max(0, 3 - len(examples))]:
                examples.append(f"pattern {int(pats[i]):#010x}: NVIDIA {theirs[i]:#x}, fmtsim {ours[i]:#x}")
        if progress and base >= next_report:
            print(f"  cuda {fmt} {ov} {rm}: {(base - start) / span:.0%} ({time.perf_counter() - t0:.0f} s)",
                  file=sys.stderr, flush=True)
            next_report = base + span // 16
    return {"entry point": f"{fmt} {ov} {rm} (float32)", "patterns": f"{start:#010x}..{stop - 1:#010x}",
            "count": stop - start, "unexplained differences": diffs,
            "known divergences": "; ".join(f"{k}: {v}" for k, v in known.items()) or "-",
            "wall s": round(time.perf_counter() - t0, 1), "examples": examples}


def _main_cuda(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    from fmtsim.conformance.impls import cuda

    why = cuda.missing()
    if why is not None:
        print(f"sweep: {why}", file=sys.stderr)
        return 2
    entries = sorted({(f, o, r) for f, o, r, _ in cuda.entry_points()})
    if args.entry:
        want = tuple(args.entry.split(":"))
        if want not in entries:
            print(f"sweep: unknown cuda entry point {args.entry!r}; choose from "
                  + ", ".join(":".join(e) for e in entries), file=sys.stderr)
            return 2
        entries = [want]  # type: ignore[list-item]
    start, stop = int(args.start, 0), int(args.stop, 0)
    if not 0 <= start < stop <= TOTAL:
        print("sweep: need 0 <= --start < --stop <= 0x100000000", file=sys.stderr)
        return 2
    print(f"CUDA {cuda.version()} headers from {cuda.find_include_dirs()[1]}", file=sys.stderr)
    results = []
    for e in entries:
        r = sweep_cuda(e, start, stop, args.chunk)
        for ex in r.pop("examples"):  # type: ignore[attr-defined]
            print("  ", ex)
        results.append(r)
    print(tabulate([list(r.values()) for r in results], list(results[0].keys()), disable_numparse=True))
    return 1 if any(r["unexplained differences"] for r in results) else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("format", help="a format name, or 'all' for every format the peer has")
    ap.add_argument("--rounding")
    ap.add_argument("--overflow")
    ap.add_argument("--nan")
    ap.add_argument("--peer", choices=["ml_dtypes", "torch", "torchao"], default="ml_dtypes")
    ap.add_argument("--no-peer", action="store_true", help="the oracle only")
    ap.add_argument("--chunk", type=int, default=1 << 24, help="patterns per input range (one task)")
    ap.add_argument("--jobs", type=int, help="local worker processes (default: this process)")
    ap.add_argument("--scheduler", help="a Dask scheduler address (tcp://host:8786) to run the ranges on")
    ap.add_argument("--entry", help="cuda only: FORMAT:OVERFLOW:ROUNDING, e.g. e4m3:nonsat:rne (default: all)")
    ap.add_argument("--start", default="0", help="cuda only: first float32 pattern (default 0)")
    ap.add_argument("--stop", default=hex(TOTAL), help="cuda only: one past the last pattern (default 2^32)")
    args = ap.parse_args()
    if args.format == "cuda":
        return _main_cuda(args)
    from tabulate import tabulate

    if args.format == "all":
        names = [n for n, f in fmtsim.FORMATS.items() if _peer_encoder(args.peer, n) is not None]
    else:
        names = [fmtsim.get_format(args.format).name]
    results = []
    for name in names:
        prof = resolve(name, profile=args.peer)
        r = sweep(name, args.rounding or prof.rounding, args.overflow or prof.overflow,
                  args.nan or prof.nan, None if args.no_peer else args.peer, args.chunk,
                  jobs=args.jobs, scheduler=args.scheduler)
        results.append(r)
        for e in r.pop("examples"):  # type: ignore[attr-defined]
            print("  ", e)
    print(tabulate([list(r.values()) for r in results], list(results[0].keys()), disable_numparse=True))
    failed = any(r["mismatches vs oracle"] or r["mismatches vs peer (unexplained)"] not in (0, "-")
                 for r in results)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
