"""A production-size GEMM check, three ways: ``fmtsim mma matmul`` in one process, on
``--jobs`` local processes and on a Dask ``LocalCluster``, the three D files compared bit for
bit, and a spot check of the result by the numpy engine (a block of outputs) and by the
Fraction twin (a few outputs).

    python tools/check_8192.py --dir /tmp/big                # 8192^3, sm90_wgmma_fp8, E4M3
    python tools/check_8192.py --dir /tmp/small --size 256   # the same record in seconds
    python tools/check_8192.py --dir /tmp/fp4 --unit sm100_mxf4nvf4 --format e2m1   # NVFP4

Operands: random finite codes of the format (seeded), a random fp32 C, and for the
block-scaled units random scales (``--scale-format``, ``--block-size``; by default the
unit's last scale format with its block: UE4M3 per 16 for mxf4nvf4, E8M0 per 32 for mxf4
and mxf8f6f4): E8M0 codes within 2^+-8, UE4M3 finite nonzero codes. Prints one line per
run (wall time, ns per product, sha256 of D) and exits 1 when the runs differ or a spot
check fails. Needs fmtsim[dask] for the LocalCluster run (``--no-dask`` skips it).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np


def make_operands(out: Path, size: int, fmt: str, seed: int, scales: tuple[str, int] | None) -> list[str]:
    """Writes a.npy, b.npy, c.npy (and sa.npy, sb.npy); returns the CLI's scale arguments."""
    from fmtsim.mma.arith import operand_table

    rng = np.random.default_rng(seed)
    finite = np.nonzero(operand_table(fmt).cls == 0)[0].astype(np.uint8)
    np.save(out / "a.npy", rng.choice(finite, (size, size)))
    np.save(out / "b.npy", rng.choice(finite, (size, size)))
    np.save(out / "c.npy", (rng.standard_normal((size, size)) * 16).astype(np.float32))
    if scales is None:
        return []
    sf, bs = scales
    lo, hi = (127 - 8, 127 + 9) if sf == "e8m0" else (0x01, 0x7F)  # UE4M3: 0x7F is NaN
    np.save(out / "sa.npy", rng.integers(lo, hi, (size, size // bs)).astype(np.uint8))
    np.save(out / "sb.npy", rng.integers(lo, hi, (size // bs, size)).astype(np.uint8))
    return ["--a-scales", str(out / "sa.npy"), "--b-scales", str(out / "sb.npy"), "--scale-format", sf,
            "--block-size", str(bs)]


def unit_scales(unit: str, scale_format: str | None, block_size: int | None) -> tuple[str, int] | None:
    """The block scales a scaled unit runs with: the unit's last scale format (UE4M3 for
    mxf4nvf4) and its block size (16 for UE4M3, else 32) unless given."""
    from fmtsim.mma import UNITS

    u = UNITS[unit]
    if not u.scaled:
        if scale_format or block_size:
            raise SystemExit(f"check_8192: {unit} takes no block scales")
        return None
    sf = scale_format or u.scale_formats[-1]
    bs = block_size or (16 if sf == "ue4m3" else 32)
    return sf, bs


def run_cli(out: Path, name: str, unit: str, fmt: str, extra: list[str]) -> tuple[float, str]:
    cmd = [sys.executable, "-m", "fmtsim", "mma", "matmul", str(out / "a.npy"), str(out / "b.npy"),
           str(out / "c.npy"), "--unit", unit, "--a-format", fmt, "--b-format", fmt, "-o", str(out / f"d_{name}.npy"),
           *extra]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"check_8192: {name} failed ({r.returncode}): {r.stderr.strip()[-500:]}")
    return wall, r.stdout.strip()


def run_dask(out: Path, unit: str, fmt: str, workers: int, scale_args: list[str]) -> tuple[float, str]:
    from dask.distributed import LocalCluster

    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster:
        return run_cli(out, "dask", unit, fmt, [*scale_args, "--scheduler", cluster.scheduler_address])


def digest(d: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(d).view(np.uint32).tobytes()).hexdigest()


def spot_check(out: Path, unit: str, fmt: str, d: np.ndarray, block: int, twin: int, seed: int,
               scales: tuple[str, int] | None) -> list[str]:
    """Failures (empty when the numpy engine and the Fraction twin agree with d)."""
    from fmtsim.mma import matmul, slow_matmul

    a, b, c = np.load(out / "a.npy"), np.load(out / "b.npy"), np.load(out / "c.npy")
    sa = sb = None
    if scales is not None:
        sa, sb = np.load(out / "sa.npy"), np.load(out / "sb.npy")
    rng = np.random.default_rng(seed + 1)
    size = a.shape[0]
    rows = np.sort(rng.choice(size, min(block, size), replace=False))
    cols = np.sort(rng.choice(size, min(block, size), replace=False))
    kw: dict = dict(unit=unit, a_format=fmt, b_format=fmt)

    def scaled(i: np.ndarray | slice, j: np.ndarray | slice) -> dict:
        if scales is None or sa is None or sb is None:
            return {}
        return dict(a_scales=sa[i], b_scales=sb[:, j], scale_format=scales[0], block_size=scales[1])

    bad = []
    t0 = time.perf_counter()
    sub = matmul(a[rows], b[:, cols], c[np.ix_(rows, cols)], engine="numpy", **kw, **scaled(rows, cols))
    sub = sub.view(np.uint32)
    n_bad = int((sub != d[np.ix_(rows, cols)]).sum())
    print(f"numpy engine, {len(rows)} x {len(cols)} outputs: {n_bad} differ ({time.perf_counter() - t0:.1f} s)")
    if n_bad:
        bad.append(f"numpy engine: {n_bad} outputs differ")
    t0 = time.perf_counter()
    for i, j in zip(rows[:twin], cols[:twin], strict=False):
        s = np.asarray(slow_matmul(a[i:i + 1], b[:, j:j + 1], c[i:i + 1, j:j + 1], **kw,
                                   **scaled(slice(i, i + 1), slice(j, j + 1))), np.float32)
        want, got = int(s.view(np.uint32)[0, 0]), int(d[i, j])
        if want != got:
            bad.append(f"Fraction twin D[{i}, {j}] = 0x{want:08x}, run 0x{got:08x}")
    print(f"Fraction twin, {min(twin, len(rows))} outputs: {len(bad) - bool(n_bad)} differ "
          f"({time.perf_counter() - t0:.1f} s)")
    return bad


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", required=True, type=Path, help="where operands and D files go")
    ap.add_argument("--size", type=int, default=8192, help="M = N = K (default 8192)")
    ap.add_argument("--unit", default="sm90_wgmma_fp8")
    ap.add_argument("--format", default="e4m3")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--seed", type=int, default=8192)
    ap.add_argument("--no-dask", action="store_true", help="skip the LocalCluster run")
    ap.add_argument("--spot", type=int, default=64, help="rows and columns of the numpy-engine spot check")
    ap.add_argument("--twin", type=int, default=8, help="outputs checked by the Fraction twin")
    ap.add_argument("--scale-format", choices=["e8m0", "ue4m3"], help="block scales (scaled units)")
    ap.add_argument("--block-size", type=int, help="elements per block scale (scaled units)")
    args = ap.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    scales = unit_scales(args.unit, args.scale_format, args.block_size)
    scale_args = make_operands(args.dir, args.size, args.format, args.seed, scales)
    products = args.size ** 3
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    with_scales = f", {scales[0]} scales per {scales[1]}" if scales else ""
    print(f"{args.unit} {args.format} x {args.format}{with_scales}, {args.size}^3 = {products:.3g} products, "
          f"{os.cpu_count()} cores, load {load:.1f}")
    runs = {"one": lambda: run_cli(args.dir, "one", args.unit, args.format, scale_args),
            f"jobs{args.jobs}": lambda: run_cli(args.dir, f"jobs{args.jobs}", args.unit, args.format,
                                                [*scale_args, "--jobs", str(args.jobs)])}
    if not args.no_dask:
        runs["dask"] = lambda: run_dask(args.dir, args.unit, args.format, args.jobs, scale_args)
    digests = {}
    for name, fn in runs.items():
        wall, line = fn()
        d = np.load(args.dir / f"d_{name}.npy")
        digests[name] = digest(d)
        print(f"{name}: {wall:.1f} s, {wall / products * 1e9:.2f} ns per product, sha256 {digests[name][:16]}; {line}")
    same = len(set(digests.values())) == 1
    print("D identical bit for bit across the runs:", same)
    bad = spot_check(args.dir, args.unit, args.format, np.load(args.dir / "d_one.npy").view(np.uint32), args.spot,
                     args.twin, args.seed, scales)
    for line in bad:
        print("check_8192:", line)
    return 0 if same and not bad else 1


if __name__ == "__main__":
    raise SystemExit(main())
