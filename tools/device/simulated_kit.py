"""A stand-in for the compiled ``fmtsim_kit`` binary, on the CPU, for testing kit.py without a GPU.

It answers the binary's command line (info, list, cvt, mma) from fmtsim's own models: conversions
under the ``ptx`` profile, matrix kernels through ``fmtsim.mma.matmul`` with the unit named by
--unit-map (kernel=unit, e.g. wgmma_e4m3_e4m3=sm90_wgmma_fp8). To exercise kit.py's choice among
packing candidates it answers correctly only for the LAST variant of a kernel's candidate list
(an earlier one gives the transposed tile, as a wrong fragment layout would). It is evidence about
kit.py, never about a GPU: its results are fmtsim's by construction.

    python tools/device/simulated_kit.py --cc 9.0 [--unit-map K=U ...] -- info | list | cvt ... | mma ...
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kit import KERNELS, fp16_representable  # noqa: E402

import fmtsim  # noqa: E402
from fmtsim import mma  # noqa: E402

CVT = ["f32_to_e4m3.rne.satfinite", "f32_to_e5m2.rne.satfinite", "f16_to_e4m3.rne.satfinite",
       "f16_to_e5m2.rne.satfinite", "f32_to_e2m1.rne.satfinite", "e4m3_to_f32", "e5m2_to_f32", "e2m1_to_f32"]


def _source(op: str) -> tuple[str, np.dtype]:
    src = op.split("_to_")[0]
    return src, {"f32": np.dtype(np.float32), "f16": np.dtype(np.float16)}[src]


def cvt(op: str, src_path: str, dst_path: str, n: int) -> int:
    raw = np.fromfile(src_path, dtype=np.uint32)
    if op.endswith("_to_f32"):
        fmt = op.split("_to_")[0]
        out = fmtsim.decode(raw.astype(np.uint8), fmt, dtype=np.float32).view(np.uint32)
    else:
        conv, rounding, overflow = op.split(".")
        fmt = conv.split("_to_")[1]
        _, dt = _source(op)
        x = raw.view(np.float32) if dt == np.float32 else raw.astype(np.uint16).view(np.float16)
        out = fmtsim.encode(x, fmt, rounding=rounding, overflow=overflow, profile="ptx").astype(np.uint32)
    np.asarray(out, dtype=np.uint32).tofile(dst_path)
    print("ok")
    return 0


def run_mma(name: str, job: str, m: int, n: int, k: int, variant: int, units: dict[str, str]) -> int:
    cands = [kk for kk in KERNELS if kk.name == name]
    if not cands or name not in units:
        print("unsupported")
        return 4
    kern = next((kk for kk in cands if variant in kk.variants), cands[0])
    types = variant & ~0xFF
    kern = next((kk for kk in cands if all((v & ~0xFF) == types for v in kk.variants)), kern)
    d = Path(job)
    dt = {"fp16": np.uint16, "bf16": np.uint16, "tf32": np.uint32}.get(kern.a_format, np.uint8)
    a = np.fromfile(d / "a.bin", dtype=dt).reshape(m, k)
    b = np.fromfile(d / "b.bin", dtype=dt).reshape(k, n)
    c = np.fromfile(d / "c.bin", dtype=np.float32).reshape(m, n)
    # the binary takes tf32 operands as fp32 patterns; fmtsim's tf32 units take those as "fp32"
    fmt_a, fmt_b = ("fp32", "fp32") if kern.a_format == "tf32" else (kern.a_format, kern.b_format)
    if kern.c_format == "fp16" and not fp16_representable(c).all():  # as the binary refuses it
        print(f"fmtsim_kit: {name} takes an fp16 C: c.bin holds values fp16 cannot", file=sys.stderr)
        return 2
    kw = {}
    if kern.scale_format:
        bs = kern.block_size or 32
        kw = dict(a_scales=np.fromfile(d / "sa.bin", dtype=np.uint8).reshape(m, k // bs),
                  b_scales=np.fromfile(d / "sb.bin", dtype=np.uint8).reshape(k // bs, n),
                  scale_format=kern.scale_format, block_size=bs)
    out = mma.matmul(a, b, c, unit=units[name], a_format=fmt_a, b_format=fmt_b, **kw)
    if variant != kern.variants[-1]:  # a wrong packing candidate: rows of each 8-row group reversed
        out = out.reshape(m // 8, 8, n)[:, ::-1, :].reshape(m, n)
    np.ascontiguousarray(out, dtype=np.float32).tofile(d / "d.bin")
    print("ok")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cc", default="9.0")
    ap.add_argument("--unit-map", nargs="*", default=[])
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    args = ap.parse_args(argv)
    cmd = [c for c in args.cmd if c != "--"]
    units = dict(item.split("=", 1) for item in args.unit_map)
    if cmd[0] == "info":
        print(json.dumps({"name": "simulated (fmtsim models, no GPU)", "cc": args.cc, "driver": 0, "runtime": 0}))
        return 0
    if cmd[0] == "list":
        for op in CVT:
            print("cvt", op)
        for kern in KERNELS:
            print("mma", kern.name, kern.m, 8, kern.k)
        return 0
    if cmd[0] == "cvt":
        if cmd[1] not in CVT:
            print("unsupported")
            return 4
        return cvt(cmd[1], cmd[2], cmd[3], int(cmd[4]))
    if cmd[0] == "mma":
        return run_mma(cmd[1], cmd[2], int(cmd[3]), int(cmd[4]), int(cmd[5]), int(cmd[6], 0), units)
    return 2


if __name__ == "__main__":
    sys.exit(main())
