#!/usr/bin/env python3
"""Throughput of fmtsim against its peers, measured side by side in one run.

    python tools/bench.py [--n 16777216] [--repeat 3] [--only codec]

Peers: ml_dtypes ``astype`` always; torch casts (and torchao, where a section
uses it) when importable; MMA-Sim's instruction models for the matrix units
(``--only mma``) when mmasim is installed. Every number is the best of ``--repeat`` runs; the
ratio column is peer time / fmtsim time (> 1: fmtsim is faster). Inputs are
shuffled (ml_dtypes is several times faster on sorted data) and spread over the
whole range of each format: random signs, exponents from below the smallest
subnormal to above the overflow threshold, random mantissas.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

import fmtsim
from fmtsim import rounding
from fmtsim.policy import resolve

EIGHT_BIT = ["e4m3", "e4m3fnuz", "e5m2", "e5m2fnuz", "e8m0"]
ALL_ML = ["e4m3", "e4m3fnuz", "e5m2", "e5m2fnuz", "e8m0", "e2m1", "e3m2", "e2m3"]


def best(fn: Callable[[], object], repeat: int) -> float:
    t = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        t = min(t, time.perf_counter() - t0)
    return t


def paired(fns: dict[str, Callable[[], object]], repeat: int) -> dict[str, list[float]]:
    """Seconds of each function per repetition, the functions interleaved in every
    repetition, so that load from other jobs on a shared machine falls on all of them."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeat):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return times


def ratio_spread(peer: list[float], ours: list[float]) -> str:
    """peer/ours per repetition: median (min-max)."""
    r = sorted(p / o for p, o in zip(peer, ours, strict=True))
    return f"{np.median(r):.2f}x ({r[0]:.2f}-{r[-1]:.2f})"


def spread(fmt: str, n: int, rng: np.random.Generator) -> np.ndarray:
    f = fmtsim.get_format(fmt)
    lo = np.log2(float(f.min_positive)) - 3
    hi = np.log2(float(f.max_finite)) + 2
    e = rng.uniform(lo, hi, n)
    x = np.exp2(e) * rng.choice([-1.0, 1.0], n)
    if not f.signed:
        x = np.abs(x)
    x = x.astype(np.float32)
    rng.shuffle(x)
    return x


def row(label: str, ours: float, peer: float | None, n: int, peer_name: str) -> list[str]:
    ns = lambda t: f"{t / n * 1e9:.2f}"  # noqa: E731
    if peer is None:
        return [label, ns(ours), "-", "-", peer_name]
    return [label, ns(ours), ns(peer), f"{peer / ours:.2f}x", peer_name]


def bench_codec(n: int, repeat: int, rng: np.random.Generator) -> list[list[str]]:
    rows = []
    try:
        import torch  # type: ignore[import-not-found]
    except ImportError:
        torch = None
    torch_types = {} if torch is None else {
        "e4m3": getattr(torch, "float8_e4m3fn", None), "e5m2": getattr(torch, "float8_e5m2", None),
        "e4m3fnuz": getattr(torch, "float8_e4m3fnuz", None), "e5m2fnuz": getattr(torch, "float8_e5m2fnuz", None),
        "e8m0": getattr(torch, "float8_e8m0fnu", None),
    }
    for fmt in ALL_ML:
        f = fmtsim.get_format(fmt)
        x = spread(fmt, n, rng)
        out = fmtsim.encode(x, fmt, profile="ml_dtypes")  # warm the table
        t_ours = best(lambda: fmtsim.encode(x, fmt, profile="ml_dtypes"), repeat)
        t_ml = best(lambda: x.astype(f.ml_dtype), repeat)
        assert np.array_equal(out, x.astype(f.ml_dtype).view(np.uint8)) or fmt == "e8m0"
        rows.append(row(f"encode f32->{fmt} rne", t_ours, t_ml, n, "ml_dtypes astype"))
        tt = torch_types.get(fmt)
        if tt is not None:  # fmtsim under the torch profile, the same table path, torch's own answers
            xt = torch.from_numpy(x)
            fmtsim.encode(x, fmt, profile="torch")
            t_ours_t = best(lambda: fmtsim.encode(x, fmt, profile="torch"), repeat)
            rows.append(row(f"encode f32->{fmt} (torch profile)", t_ours_t, best(lambda: xt.to(tt), repeat), n,
                            f"torch .to ({torch.get_num_threads()} threads)"))
    for fmt in EIGHT_BIT:
        f = fmtsim.get_format(fmt)
        codes = rng.integers(0, 256, n, dtype=np.uint8)
        typed = codes.view(f.ml_dtype)
        t_ours = best(lambda: fmtsim.decode(codes, fmt), repeat)
        t_ml = best(lambda: typed.astype(np.float32), repeat)
        rows.append(row(f"decode {fmt}->f32", t_ours, t_ml, n, "ml_dtypes astype"))
    for fmt in ("e4m3", "e5m2"):
        f = fmtsim.get_format(fmt)
        x64 = spread(fmt, n, rng).astype(np.float64) * (1 + 2.0**-30)
        t_ours = best(lambda: fmtsim.encode(x64, fmt, profile="ml_dtypes"), repeat)
        t_ml = best(lambda: x64.astype(f.ml_dtype), repeat)
        rows.append(row(f"encode f64->{fmt} rne (exact)", t_ours, t_ml, n, "ml_dtypes astype (rounds twice)"))
    return rows


_CPFLOAT_HARNESS = r"""
#include <string.h>
#include "cpfloat_binary32.h"
/* one optstruct per format; round: cpfloat's CPFLOAT_RND_* */
int fmtsim_bench_cpfloat(float *X, const float *A, size_t n, int round, const char *fmt) {
  static optstruct *o = NULL;
  if (o == NULL) o = init_optstruct();
  strncpy(o->format, fmt, sizeof(o->format) - 1);
  o->format[sizeof(o->format) - 1] = 0;
  if (cpfloat_populate_optstruct_from_format(o) != 0) return -1;
  o->round = round;
  o->saturation = CPFLOAT_SAT_USE;
  return cpfloatf(X, A, n, o);
}
"""


def _cpfloat() -> tuple[Callable[..., int] | None, str]:
    """cpfloat's cpfloatf, compiled here against the user's copy (CPFLOAT_PATH: the folder holding
    cpfloat_binary32.h; cpfloat is LGPL and fmtsim carries none of it), single-threaded; or the reason."""
    import ctypes
    import shutil
    import subprocess
    import tempfile

    inc = os.environ.get("CPFLOAT_PATH")
    if not inc:
        return None, "set CPFLOAT_PATH to cpfloat's src/ folder to compare"
    head = Path(inc) / "cpfloat_binary32.h"
    if not head.is_file():
        head = Path(inc) / "src" / "cpfloat_binary32.h"
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if not head.is_file() or cc is None:
        return None, f"no cpfloat_binary32.h under {inc}" if cc else "no C compiler"
    tmp = Path(tempfile.mkdtemp(prefix="fmtsim-bench-cpfloat-"))
    (tmp / "h.c").write_text(_CPFLOAT_HARNESS)
    r = subprocess.run([cc, "-O3", "-march=native", "-shared", "-fPIC", f"-I{head.parent}", "-o", str(tmp / "h.so"),
                        str(tmp / "h.c"), "-lm"], capture_output=True, text=True)
    if r.returncode:
        return None, f"cpfloat did not compile: {r.stderr.strip()[:200]}"
    lib = ctypes.CDLL(str(tmp / "h.so"))
    fn = lib.fmtsim_bench_cpfloat
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_char_p]
    fn.restype = ctypes.c_int
    return fn, str(head.parent)


def bench_element(n: int, repeat: int, rng: np.random.Generator) -> list[list[str]]:
    """One thread each: fmtsim's compiled element encode against torch's ``.to`` (torch set to one
    thread) on the same array, a memory copy of that array as the floor, and stochastic rounding
    against cpfloat (CPFLOAT_PATH) and qtorch where present. Ratios: median (min-max) over
    interleaved repetitions."""
    rows: list[list[str]] = []
    ns = lambda t: f"{np.median(t) / n * 1e9:.2f}"  # noqa: E731
    try:
        import torch  # type: ignore[import-not-found]

        torch.set_num_threads(1)
    except ImportError:
        torch = None
    engine = "compiled" if rounding._KERNELS.unavailable_reason() is None else "numpy (no compiler)"
    for fmt, tname in (("e4m3", "float8_e4m3fn"), ("e5m2", "float8_e5m2")):
        x = spread(fmt, n, rng)
        dst = np.empty_like(x)
        fns: dict[str, Callable[[], object]] = {"fmtsim": lambda: fmtsim.encode(x, fmt, profile="torch"),
                                                "memcpy": lambda: np.copyto(dst, x)}
        if torch is not None:
            xt, tt = torch.from_numpy(x), getattr(torch, tname)
            assert np.array_equal(fmtsim.encode(x, fmt, profile="torch"), xt.to(tt).view(torch.uint8).numpy())
            fns["torch"] = lambda: xt.to(tt)
        fns["fmtsim"]()
        t = paired(fns, repeat)
        rows.append([f"encode f32->{fmt} ({engine})", ns(t["fmtsim"]), "torch .to, 1 thread",
                     ns(t["torch"]) if "torch" in t else "-",
                     ratio_spread(t["torch"], t["fmtsim"]) if "torch" in t else "-", ns(t["memcpy"])])
        xb = x.astype(ml_dtypes.bfloat16)
        fb: dict[str, Callable[[], object]] = {"fmtsim": lambda: fmtsim.encode(xb, fmt, profile="torch")}
        if torch is not None:
            xbt = torch.from_numpy(xb.view(np.int16)).view(torch.bfloat16)
            fb["torch"] = lambda: xbt.to(tt)
        fb["fmtsim"]()
        t = paired(fb, repeat)
        rows.append([f"encode bf16->{fmt} ({engine})", ns(t["fmtsim"]), "torch .to, 1 thread",
                     ns(t["torch"]) if "torch" in t else "-",
                     ratio_spread(t["torch"], t["fmtsim"]) if "torch" in t else "-", "-"])
    for fmt, tname in (("e4m3", "float8_e4m3fn"), ("e5m2", "float8_e5m2")):
        codes = rng.integers(0, 256, n, dtype=np.uint8)
        fd: dict[str, Callable[[], object]] = {"fmtsim": lambda: fmtsim.decode(codes, fmt)}
        if torch is not None:
            ct = torch.from_numpy(codes).view(getattr(torch, tname))
            fd["torch"] = lambda: ct.to(torch.float32)
        t = paired(fd, repeat)
        rows.append([f"decode {fmt}->f32 ({engine})", ns(t["fmtsim"]), "torch .to, 1 thread",
                     ns(t["torch"]) if "torch" in t else "-",
                     ratio_spread(t["torch"], t["fmtsim"]) if "torch" in t else "-", "-"])
    cp, where = _cpfloat()
    try:
        from qtorch.quant import float_quantize  # type: ignore[import-not-found]
    except Exception:  # qtorch absent, or its extension does not build here
        float_quantize = None
    for fmt, man in (("e4m3", 3), ("e5m2", 2)):
        f = fmtsim.get_format(fmt)
        x = spread(fmt, n, rng)
        x = np.clip(x, -float(f.max_finite), float(f.max_finite))
        r = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
        fs: dict[str, Callable[[], object]] = {"fmtsim": lambda: fmtsim.encode(x, fmt, rounding="sr", rbits=r)}
        out = np.empty_like(x)
        if cp is not None:
            fs["cpfloat"] = lambda: cp(out.ctypes.data, x.ctypes.data, n, 5, fmt.encode())
        if float_quantize is not None:
            xq = torch.from_numpy(x)
            fs["qtorch"] = lambda: float_quantize(xq, 5 if fmt == "e5m2" else 4, man, rounding="stochastic")
        fs["fmtsim"]()
        t = paired(fs, repeat)
        for peer, label in (("cpfloat", f"cpfloat SP ({where})"), ("qtorch", "qtorch float_quantize stochastic")):
            if peer in t:
                rows.append([f"sr f32->{fmt} (fmtsim: its own rbits; {engine})", ns(t["fmtsim"]), label,
                             ns(t[peer]), ratio_spread(t[peer], t["fmtsim"]), "-"])
        if not any(p in t for p in ("cpfloat", "qtorch")):
            rows.append([f"sr f32->{fmt} ({engine})", ns(t["fmtsim"]), f"no peer: {where}", "-", "-", "-"])
    rows.extend(_threaded_rows(n, repeat, rng, torch, engine, ns))
    return rows


def _threaded_rows(n: int, repeat: int, rng: np.random.Generator, torch: Any, engine: str,
                   ns: Callable[[list[float]], str]) -> list[list[str]]:
    """threads=<cores> (the same codes as one thread, asserted) against one thread of fmtsim, and
    torch on as many threads."""
    cores = os.cpu_count() or 1
    if cores < 2:
        return []
    rows = []
    f = fmtsim.get_format("e4m3")
    x = np.clip(spread("e4m3", n, rng), -float(f.max_finite), float(f.max_finite))  # as the sr rows above
    r = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    for label, kw in (("encode f32->e4m3", {}), ("sr f32->e4m3", {"rounding": "sr", "rbits": r})):
        assert np.array_equal(fmtsim.encode(x, "e4m3", threads=cores, **kw), fmtsim.encode(x, "e4m3", **kw))
        fns: dict[str, Callable[[], object]] = {"one": lambda: fmtsim.encode(x, "e4m3", **kw),
                                                "many": lambda: fmtsim.encode(x, "e4m3", threads=cores, **kw)}
        t = paired(fns, repeat)
        rows.append([f"{label}, threads={cores} ({engine})", ns(t["many"]), "fmtsim, 1 thread", ns(t["one"]),
                     ratio_spread(t["one"], t["many"]), "-"])
    if torch is not None:
        xt = torch.from_numpy(x)
        torch.set_num_threads(cores)
        try:
            t = paired({"many": lambda: fmtsim.encode(x, "e4m3", profile="torch", threads=cores),
                        "torch": lambda: xt.to(torch.float8_e4m3fn)}, repeat)
        finally:
            torch.set_num_threads(1)
        rows.append([f"encode f32->e4m3, threads={cores} ({engine})", ns(t["many"]), f"torch .to, {cores} threads",
                     ns(t["torch"]), ratio_spread(t["torch"], t["many"]), "-"])
    return rows


def bench_tables() -> list[list[str]]:
    rows = []
    for fmt in ("e4m3", "e5m2", "e8m0", "uint8"):
        rounding.table_f32.cache_clear()
        rounding._sides.cache_clear()
        t0 = time.perf_counter()
        rounding.table_f32(resolve(fmt))
        rows.append([f"float32 table build {fmt}", f"{(time.perf_counter() - t0) * 1e3:.1f} ms"])
    return rows


def bench_memory(n: int, rng: np.random.Generator) -> list[list[str]]:
    x = spread("e4m3", n, rng)
    x64 = x.astype(np.float64)
    fmtsim.encode(x[:10], "e4m3")
    rows = []
    for label, arr in (("float32", x), ("float64", x64)):
        tracemalloc.start()
        fmtsim.encode(arr, "e4m3")
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        rows.append([f"encode {label} peak allocation beyond input",
                     f"{peak / n:.2f} bytes/element (output is 1)"])
    return rows


def _numpy_mx(x: np.ndarray, elem: str, dtype: object) -> tuple[np.ndarray, np.ndarray]:
    """The straightforward numpy + ml_dtypes MX quantizer a user would write (float log2)."""
    f = fmtsim.get_format(elem)
    xb = x.reshape(-1, 32)
    amax = np.abs(xb).max(axis=1)
    with np.errstate(divide="ignore"):
        e = np.clip(np.floor(np.log2(amax)) - f.emax, -127, 127)
    scaled = np.clip(xb / np.exp2(e)[:, None], -float(f.max_finite), float(f.max_finite))
    return scaled.astype(dtype), (e + 127).astype(np.uint8)


def bench_block(n: int, repeat: int, rng: np.random.Generator) -> list[list[str]]:
    import ml_dtypes

    from fmtsim import mx, nvfp4

    x = (rng.standard_normal(n) * np.exp2(rng.integers(-8, 8, n))).astype(np.float32).reshape(-1, 1024)
    rows = []
    try:
        import torch
        from torchao.prototype.mx_formats.mx_tensor import to_mx  # type: ignore[import-not-found]
    except ImportError:
        torch = None
    for scheme, elem, dt in (("mxfp8_e4m3", "e4m3", ml_dtypes.float8_e4m3fn),
                             ("mxfp4", "e2m1", ml_dtypes.float4_e2m1fn)):
        t_ours = best(lambda: mx.quantize(x, scheme), repeat)
        t_np = best(lambda: _numpy_mx(x, elem, dt), repeat)
        rows.append(row(f"mx.quantize {scheme} (floor)", t_ours, t_np, n, "numpy+ml_dtypes, float log2"))
        t_numpy_engine = best(lambda: mx.quantize(x, scheme, engine="numpy"), repeat)
        rows.append(row(f"mx.quantize {scheme} (floor)", t_ours, t_numpy_engine, n,
                        "fmtsim's own numpy engine (the compiled kernel's twin)"))
        if torch is not None:
            xt = torch.from_numpy(x)
            tdt = torch.float8_e4m3fn if elem == "e4m3" else torch.float4_e2m1fn_x2
            rows.append(row(f"mx.quantize {scheme} (floor)", t_ours, best(lambda: to_mx(xt, tdt, 32), repeat), n,
                            "torchao to_mx (CPU)"))
            rows.append(mx_against_torchao(xt, tdt, scheme, n, repeat))
    t_nv = best(lambda: nvfp4.quantize(x), repeat)
    rows.append(row("nvfp4.quantize 1x16 (te)", t_nv, None, n, "no peer runs TE's recipe on the CPU"))
    rows.append(row("nvfp4.quantize 1x16 (te)", t_nv, best(lambda: nvfp4.quantize(x, engine="numpy"), repeat), n,
                    "fmtsim's own numpy engine (the compiled kernel's twin)"))
    if torch is not None:
        from torchao.prototype.mx_formats.nvfp4_tensor import nvfp4_quantize, per_tensor_amax_to_scale

        xt = torch.from_numpy(x)
        t_ao = best(lambda: nvfp4.quantize(x, recipe="torchao"), repeat)
        t_peer = best(lambda: nvfp4_quantize(xt, 16, per_tensor_amax_to_scale(xt.abs().max())), repeat)
        rows.append(row("nvfp4.quantize 1x16 (torchao)", t_ao, t_peer, n, "torchao nvfp4_quantize (CPU)"))
    return rows


def mx_against_torchao(xt: object, tdt: object, scheme: str, n: int, repeat: int) -> list[str]:
    """fmtsim and torchao's to_mx interleaved, 2 * repeat times: median and spread of the ratio."""
    from torchao.prototype.mx_formats.mx_tensor import to_mx

    from fmtsim import mx

    x = xt.numpy()  # type: ignore[attr-defined]
    t = paired({"ours": lambda: mx.quantize(x, scheme), "peer": lambda: to_mx(xt, tdt, 32)}, 2 * repeat)
    ns = lambda v: f"{min(v) / n * 1e9:.2f}-{max(v) / n * 1e9:.2f}"  # noqa: E731
    return [f"mx.quantize {scheme}, interleaved x{2 * repeat}", ns(t["ours"]), ns(t["peer"]),
            ratio_spread(t["peer"], t["ours"]), "torchao to_mx; ratio: median (min-max) of the pairs"]


def _load() -> str:
    """The 1-minute load average (other jobs on a shared machine), as /proc/loadavg says."""
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "?"


def bench_mma_scale(repeat: int, rng: np.random.Generator, m: int = 512, n: int = 512, k: int = 2048,
                    cores: int = 64) -> list[list[str]]:
    """The FP8 units per core against numpy's float64 BLAS on the decoded operands: the numpy
    engine and the compiled one (nv units; the AMD unit has only numpy) on one process, the
    compiled one on jobs = 2 local processes, and the projection for an 8192^3 check on this
    machine and on ``cores`` cores (the jobs=1 time per product divided by the cores: tiles
    are independent, so that is the bound a free core each gives)."""
    from fmtsim.mma import UNITS, matmul
    from fmtsim.mma.arith import operand_table
    from fmtsim.mma.compiled import uses_compiled

    prods = m * n * k
    big = 8192 ** 3
    rows = []
    for unit, fmt, kw in (("sm90_wgmma_fp8", "e4m3", {}), ("sm89_mma_fp8", "e4m3", {}),
                          ("sm100_f8f6f4", "e4m3", {}), ("cdna3_mfma_fp8", "e4m3fnuz", {}),
                          ("sm100_mxf8f6f4", "e4m3", dict(a_scales=rng.integers(120, 135, (m, k // 32)),
                                                          b_scales=rng.integers(120, 135, (k // 32, n)),
                                                          scale_format="e8m0", block_size=32))):
        t8 = operand_table(fmt)
        a = rng.choice(np.nonzero(t8.cls == 0)[0], (m, k))
        b = rng.choice(np.nonzero(t8.cls == 0)[0], (k, n))
        c = rng.standard_normal((m, n)).astype(np.float32)
        av, bv = t8.values[a], t8.values[b]
        fns = {"numpy": lambda: matmul(a, b, c, unit=unit, a_format=fmt, b_format=fmt, jobs=1, engine="numpy",
                                       **kw),
               "jobs=1": lambda: matmul(a, b, c, unit=unit, a_format=fmt, b_format=fmt, jobs=1, **kw),
               "jobs=2": lambda: matmul(a, b, c, unit=unit, a_format=fmt, b_format=fmt, jobs=2, **kw),
               "blas": lambda: av @ bv + c}
        load0 = _load()
        t = paired(fns, repeat)
        load1 = _load()
        one, two = np.median(t["jobs=1"]), np.median(t["jobs=2"])

        def per(v: list[float]) -> str:
            return f"{np.median(v) / prods * 1e9:.2f} ({min(v) / prods * 1e9:.2f}-{max(v) / prods * 1e9:.2f})"

        sp = sorted(a1 / a2 for a1, a2 in zip(t["jobs=1"], t["jobs=2"], strict=True))
        engine = "compiled" if uses_compiled(UNITS[unit], "auto") else "numpy"
        rows.append([f"{unit} {m}x{n}x{k}", per(t["numpy"]), f"{per(t['jobs=1'])} {engine}", per(t["jobs=2"]),
                     f"{np.median(sp):.2f}x ({sp[0]:.2f}-{sp[-1]:.2f})", per(t["blas"]),
                     ratio_spread(t["jobs=1"], t["blas"]),
                     f"{big * one / prods / 3600:.2f} h / {big * two / prods / 3600:.2f} h / "
                     f"{big * one / prods / cores / 60:.1f} min", f"{load0} -> {load1}"])
    return rows


def bench_conformance() -> list[list[str]]:
    """Wall time of level-1 generation, the default conform run and level-2 generation,
    each as the user runs it (a separate process)."""
    import subprocess
    import tempfile

    rows = []
    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as d:
        for label, cmd in (("fmtsim gen -o DIR (level 1)", ["gen", "-o", f"{d}/l1"]),
                           ("fmtsim conform (defaults)", ["conform"]),
                           ("fmtsim gen --level 2 -o DIR", ["gen", "--level", "2", "-o", f"{d}/l2"])):
            t0 = time.perf_counter()
            r = subprocess.run([sys.executable, "-m", "fmtsim", *cmd], capture_output=True, text=True, cwd=root)
            status = "ok" if r.returncode == 0 else f"exit {r.returncode}"
            rows.append([label, f"{time.perf_counter() - t0:.1f} s", status])
    return rows


def bench_checkpoint(total_gb: float, keep: bool) -> list[list[str]]:
    """Generate a sharded OCP FP8 checkpoint of about ``total_gb`` GB, convert it in a
    separate process under /usr/bin/time -v, report throughput and peak RSS."""
    import json
    import shutil
    import subprocess
    import tempfile

    import ml_dtypes
    from safetensors.numpy import save_file

    rng = np.random.default_rng(1)
    root = Path(tempfile.mkdtemp(prefix="fmtsim-bench-"))
    src, out = root / "ocp", root / "fnuz"
    src.mkdir()
    rows_n, cols_n = 8192, 16384  # one FP8 weight: 128 MiB, the largest tensor
    per_shard = 4
    shard_bytes = per_shard * rows_n * cols_n
    n_shards = max(1, int(round(total_gb * 2**30 / shard_bytes)))
    weight_map = {}
    for s in range(n_shards):
        name = f"model-{s + 1:05d}-of-{n_shards:05d}.safetensors"
        t: dict[str, np.ndarray] = {}
        for k in range(per_shard):
            p = f"model.layers.{s * per_shard + k}.mlp.down_proj"
            # realistic codes: Gaussian weights quantized with a per-tensor amax scale
            w = rng.standard_normal((rows_n, cols_n), dtype=np.float32) * np.float32(448 / 5.5)
            t[f"{p}.weight"] = fmtsim.encode(w, "e4m3").view(ml_dtypes.float8_e4m3fn)
            del w
            t[f"{p}.weight_scale"] = np.array(0.01, np.float32)
            t[f"{p}.input_scale"] = np.array(0.1, np.float32)
        t[f"model.layers.{s}.norm.weight"] = np.ones(4096, ml_dtypes.bfloat16)
        save_file(t, str(src / name))
        weight_map.update({k: name for k in t})
    (src / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    size = sum(f.stat().st_size for f in src.iterdir())
    rows = []
    os.sync()  # the generated input is on disk and in the page cache: a warm cache, no writeback in flight
    for jobs in (1, 1, 2):
        shutil.rmtree(out, ignore_errors=True)
        cmd = ["/usr/bin/time", "-v", sys.executable, "-m", "fmtsim", "fnuz", "convert", str(src), str(out),
               "--jobs", str(jobs)]
        t0 = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent)
        wall = time.perf_counter() - t0
        if r.returncode:
            raise RuntimeError(r.stdout + r.stderr)
        rss_kb = int(next(line.split()[-1] for line in r.stderr.splitlines() if "Maximum resident" in line))
        limit = 3 * rows_n * cols_n / 2**20 + 200
        os.sync()
        rows.append([f"fnuz convert {size / 2**30:.2f} GiB, {n_shards} shards, --jobs {jobs} (verify on)",
                     f"{size / wall / 1e6:.0f} MB/s", f"{rss_kb / 1024:.0f} MiB peak RSS (limit {limit:.0f})"])
    if not keep:
        shutil.rmtree(root)
    return rows


def bench_dequantize(repeat: int) -> list[list[str]]:
    """fmtsim checkpoint dequantize -> BF16 against a plain numpy + ml_dtypes dequantizer, per process,
    warm cache: DeepSeek-V3-style FP8 (7168x7168 E4M3, 128x128 F32 scales) and gpt-oss-style MXFP4
    (8 experts x 2880 x 90 blocks). fmtsim's numbers are its streaming kernels on the file bytes in
    memory (one correct rounding per value); the peer multiplies in float32 and casts (two roundings:
    its differing outputs are counted). The end-to-end rows run the CLI on the file in a subprocess."""
    import io
    import json
    import shutil
    import subprocess
    import tempfile

    import ml_dtypes
    from safetensors.numpy import save_file

    from fmtsim.checkpoint import dequant as dq
    from fmtsim.checkpoint.files import read_array

    rng = np.random.default_rng(3)
    root = Path(tempfile.mkdtemp(prefix="fmtsim-dq-"))
    codes = rng.integers(0, 0x7E, (7168, 7168), dtype=np.uint8) | (rng.integers(0, 2, (7168, 7168), dtype=np.uint8)
                                                                   << 7)
    s = rng.uniform(1e-4, 1e-3, (56, 56)).astype(np.float32)
    (root / "fp8").mkdir()
    save_file({"m.down_proj.weight": codes.view(ml_dtypes.float8_e4m3fn), "m.down_proj.weight_scale_inv": s},
              str(root / "fp8" / "model.safetensors"))
    (root / "fp8" / "config.json").write_text(json.dumps({"quantization_config": {
        "quant_method": "fp8", "weight_block_size": [128, 128]}}))
    blocks = rng.integers(0, 256, (8, 2880, 90, 16), dtype=np.uint8)
    scales = rng.integers(112, 128, (8, 2880, 90), dtype=np.uint8)
    (root / "mx").mkdir()
    save_file({"m.experts.down_proj_blocks": blocks, "m.experts.down_proj_scales": scales},
              str(root / "mx" / "model.safetensors"))
    (root / "mx" / "config.json").write_text(json.dumps({"quantization_config": {"quant_method": "mxfp4"}}))

    def peer_fp8() -> np.ndarray:
        full = np.repeat(np.repeat(s, 128, axis=0), 128, axis=1)[: codes.shape[0], : codes.shape[1]]
        return (codes.view(ml_dtypes.float8_e4m3fn).astype(np.float32) * full).astype(ml_dtypes.bfloat16)

    fp4 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6], np.float32)

    def peer_mx() -> np.ndarray:
        vals = np.stack([fp4[blocks & 0xF], fp4[blocks >> 4]], axis=-1).reshape(*blocks.shape[:-1], 32)
        out = np.ldexp(vals, scales.astype(np.int32)[..., None] - 127)
        return out.astype(ml_dtypes.bfloat16).reshape(8, 2880, -1)

    rows = []
    for name, peer in (("fp8", peer_fp8), ("mx", peer_mx)):
        source, headers, _, configs, det = dq._scan(root / name, None)
        h = headers[source.shards[0]]
        ((tname, m),) = det.layers.items()
        tj = dq.layer_plan(m, h.entries, configs)
        with open(h.path, "rb") as fh:
            sc = read_array(fh, h, h.entries[m.scale])
        data = (root / name / "model.safetensors").read_bytes()
        e = h.entries[tname]
        pieces: list[bytes] = []

        def ours(keep: bool = False) -> None:
            res = dq.ShardResult("bench")
            emit = (lambda b: pieces.append(bytes(b))) if keep else (lambda b: None)
            if name == "fp8":
                dq._stream_fp8(tj, sc, io.BytesIO(data), h, e, "bfloat16", emit, res, None)
            else:
                dq._stream_fp4(m, sc, io.BytesIO(data), h, e, "bfloat16", None, emit, res, None)

        t_ours = best(ours, repeat)
        t_peer = best(peer, repeat)
        ours(keep=True)
        mine = np.frombuffer(b"".join(pieces), np.uint16)
        theirs = peer().view(np.uint16).reshape(-1)
        differ = int(np.count_nonzero(mine != theirs))
        label = "FP8 block 7168x7168 -> BF16" if name == "fp8" else "MXFP4 gpt-oss 8x2880x2880 -> BF16"
        mb = e.nbytes / 1e6
        rows.append([label, f"{mb / t_ours:.0f} MB/s", f"{mb / t_peer:.0f} MB/s", f"{t_peer / t_ours:.2f}",
                     f"{differ} of {mine.size} values differ (peer rounds twice)" if differ else "bit-identical"])
        out = root / f"out-{name}"
        cmd = ["/usr/bin/time", "-v", sys.executable, "-m", "fmtsim", "checkpoint", "dequantize", str(root / name),
               str(out)]
        t0 = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent)
        wall = time.perf_counter() - t0
        if r.returncode:
            raise RuntimeError(r.stdout + r.stderr)
        rss = int(next(line.split()[-1] for line in r.stderr.splitlines() if "Maximum resident" in line)) / 1024
        shard_s = float(r.stdout.strip().splitlines()[-1].split()[-1])
        rows.append([f"  end to end (CLI, file -> file, incl. start-up {wall - shard_s:.2f} s)",
                     f"{mb / shard_s:.0f} MB/s", "", "",
                     f"peak RSS {rss:.0f} MiB (largest tensor {mb * 2:.0f} MB as BF16)"])
    shutil.rmtree(root)
    return rows


def bench_mma(repeat: int, rng: np.random.Generator, big: bool = True) -> list[list[str]]:
    """fmtsim.mma.matmul against MMA-Sim's instruction models on the same GEMMs (ns per product)."""
    from fmtsim.mma import matmul
    from fmtsim.mma.arith import operand_table

    try:
        from fmtsim.conformance.impls import mmasim
        have_peer = mmasim.missing() is None
    except ImportError:
        have_peer = False
    cases = [("sm90_wgmma_fp8", "e4m3", "e4m3", None, None, (64, 256, 256)),
             ("sm89_mma_fp8", "e4m3", "e5m2", None, None, (64, 256, 256)),
             ("sm90_wgmma_fp16", "bf16", "bf16", None, None, (64, 256, 256)),
             ("sm100_f8f6f4", "e4m3", "e4m3", None, None, (128, 256, 256)),
             ("sm100_mxf8f6f4", "e4m3", "e4m3", "e8m0", 32, (128, 256, 256)),
             ("sm100_mxf4", "e2m1", "e2m1", "e8m0", 32, (128, 256, 512)),
             ("sm100_mxf4nvf4", "e2m1", "e2m1", "ue4m3", 16, (128, 256, 512)),
             ("cdna3_mfma_fp8", "e4m3fnuz", "e4m3fnuz", None, None, (64, 256, 256)),
             ("sm80_mma_fp64", "fp64", "fp64", None, None, (64, 256, 256)),
             ("cdna1_mfma_fp32", "fp32", "fp32", None, None, (64, 256, 256))]
    rows = []
    for unit, af, bf, sf, bs, (m, n, k) in cases:
        if af in ("fp32", "fp64"):  # the fma units: bit patterns of normal values, a C of their width
            fdt, udt = (np.float64, np.uint64) if af == "fp64" else (np.float32, np.uint32)
            a = rng.standard_normal((m, k)).astype(fdt).view(udt)
            b = rng.standard_normal((k, n)).astype(fdt).view(udt)
            c = rng.standard_normal((m, n)).astype(fdt)
        else:
            ta, tb = operand_table(af), operand_table(bf)
            a = rng.choice(np.nonzero(ta.cls == 0)[0], (m, k))
            b = rng.choice(np.nonzero(tb.cls == 0)[0], (k, n))
            c = rng.standard_normal((m, n)).astype(np.float32)
        sa = sb = None
        if sf and bs:
            lo, hi = (120, 135) if sf == "e8m0" else (0x30, 0x48)
            sa, sb = rng.integers(lo, hi, (m, k // bs)), rng.integers(lo, hi, (k // bs, n))
        kw = dict(a_format=af, b_format=bf, a_scales=sa, b_scales=sb, scale_format=sf, block_size=bs)
        ours = best(lambda: matmul(a, b, c, unit=unit, **kw), repeat)
        peer = None
        if have_peer:
            cfg = mmasim.Config(unit, af, bf, sf, bs)
            op = mmasim._instruction(cfg)
            peer = best(lambda: mmasim.run_mmasim(cfg, a, b, c, sa, sb, op), repeat)
        fa = f"{af}x{bf}" + (f" {sf}x{bs}" if sf else "")
        rows.append(row(f"{unit} {fa} {m}x{n}x{k}", ours, peer, m * n * k, "mmasim 2.1.1" if have_peer else "-"))
    if big:
        m, n, k = 512, 512, 4096
        a = rng.integers(0, 16, (m, k))
        b = rng.integers(0, 16, (k, n))
        sa, sb = rng.integers(120, 135, (m, k // 32)), rng.integers(120, 135, (k // 32, n))
        t0 = time.perf_counter()
        matmul(a, b, unit="sm100_mxf4", a_format="e2m1", b_format="e2m1", a_scales=sa, b_scales=sb,
               scale_format="e8m0", block_size=32)
        t = time.perf_counter() - t0
        rows.append([f"sm100_mxf4 MXFP4 {m}x{n}x{k} (whole GEMM: {t:.1f} s)", f"{t / (m * n * k) * 1e9:.2f}",
                     "-", "-", "-"])
    return rows


def bench_compare(repeat: int, rng: np.random.Generator, shape: tuple[int, int] = (4096, 4096)) -> list[list[str]]:
    """fmtsim compare's throughput per scheme on one Gaussian weight tensor (with a few
    outliers), the time for a 7B-parameter model's worth of tensors extrapolated (one process;
    --jobs N divides it by up to N, tensors being independent). Peer: the same quantize and
    dequantize done ad hoc in numpy (round to nearest even on a per-group int grid), where one
    exists: int4 per group."""
    from fmtsim.compare import evaluate

    w = rng.standard_normal(shape).astype(np.float32)
    w.reshape(-1)[rng.integers(0, w.size, 64)] *= 30
    x = w.astype(np.float64)
    n = x.size

    def numpy_int4_g32() -> np.ndarray:
        g = x.reshape(-1, 32)
        s = np.max(np.abs(g), axis=1, keepdims=True) / 7
        return (np.clip(np.rint(g / np.where(s > 0, s, 1)), -7, 7) * s).reshape(x.shape)

    rows = []
    for spec in ("int8", "int4:group=32", "e4m3:block=128", "mxfp4", "nvfp4", "int4+clip=mse", "int4+hadamard2=128"):
        fns: dict[str, Callable[[], object]] = {"ours": lambda spec=spec: evaluate(x, spec)}
        if spec == "int4:group=32":
            fns["numpy"] = numpy_int4_g32
        t = paired(fns, repeat)
        ours = float(np.median(t["ours"]))
        seven_b = ours / n * 7e9
        rows.append([spec, f"{n / ours / 1e6:.1f}", f"{seven_b / 60:.1f} min",
                     ratio_spread(t["numpy"], t["ours"]) if "numpy" in t else "-"])
    return rows


def bench_wide(n: int, repeat: int, rng: np.random.Generator) -> list[list[str]]:
    """Formats wider than a byte (uint16 codes; the exact numpy engine, no float32 table): binary16 and
    bfloat16 as user formats (e5m10, e8m7) against numpy's and ml_dtypes' own conversions, and a P3109
    Binary16 format against gfloat's round_ndarray + encode_ndarray, on the same float32 array."""
    rows: list[list[str]] = []
    x = (rng.standard_normal(n) * 100).astype(np.float32)
    ns = lambda t: f"{np.median(t) / n * 1e9:.1f}"  # noqa: E731
    peers: list[tuple[str, str, Callable[[], object] | None]] = [
        ("e5m10", "numpy .astype(float16)", lambda: x.astype(np.float16)),
        ("e8m7", "ml_dtypes .astype(bfloat16)", lambda: x.astype(ml_dtypes.bfloat16))]
    try:
        from importlib.metadata import version

        from gfloat.encode_ndarray import encode_ndarray  # type: ignore[import-not-found]
        from gfloat.formats import format_info_p3109  # type: ignore[import-not-found]
        from gfloat.round_ndarray import round_ndarray  # type: ignore[import-not-found]

        fi = format_info_p3109(16, 11)
        peers.append(("binary16p11se", f"gfloat {version('gfloat')} round_ndarray + encode_ndarray",
                      lambda: encode_ndarray(fi, round_ndarray(fi, x.astype(np.float64)))))
    except ImportError:
        peers.append(("binary16p11se", "no peer: gfloat is not installed", None))
    for fmt, label, peer in peers:
        fns: dict[str, Callable[[], object]] = {"fmtsim": lambda: fmtsim.encode(x, fmt)}
        if peer is not None:
            fns["peer"] = peer
        fns["fmtsim"]()
        t = paired(fns, repeat)
        rows.append([f"encode f32->{fmt} (uint16 codes)", ns(t["fmtsim"]), label,
                     ns(t["peer"]) if "peer" in t else "-",
                     ratio_spread(t["peer"], t["fmtsim"]) if "peer" in t else "-"])
    codes = rng.integers(0, 1 << 16, n, dtype=np.uint64).astype(np.uint16)
    codes = codes[~np.isnan(codes.view(np.float16))]
    m = codes.size
    fd: dict[str, Callable[[], object]] = {"fmtsim": lambda: fmtsim.decode(codes, "e5m10"),
                                           "peer": lambda: codes.view(np.float16).astype(np.float32)}
    t = paired(fd, repeat)
    rows.append(["decode e5m10->f32 (uint16 codes)", f"{np.median(t['fmtsim']) / m * 1e9:.1f}",
                 "numpy .view(float16).astype(float32)", f"{np.median(t['peer']) / m * 1e9:.1f}",
                 ratio_spread(t["peer"], t["fmtsim"])])
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1 << 24)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", choices=["codec", "element", "wide", "tables", "memory", "block", "conformance",
                                       "checkpoint", "dequantize", "mma", "mma-scale", "compare"],
                    nargs="*")
    ap.add_argument("--checkpoint-gb", type=float, default=2.0)
    ap.add_argument("--cores", type=int, default=64, help="cores of the 8192^3 projection (mma-scale)")
    ap.add_argument("--block-n", type=int, default=1 << 24, help="elements for the block section (4096 x 4096)")
    args = ap.parse_args()
    import ml_dtypes
    from tabulate import tabulate

    rng = np.random.default_rng(0)
    only = set(args.only or ["codec", "element", "wide", "tables", "memory", "block", "conformance", "checkpoint",
                             "dequantize", "mma", "mma-scale", "compare"])
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, numpy {np.__version__}, ml_dtypes {ml_dtypes.__version__}")
    print(f"n = {args.n} elements, best of {args.repeat}\n")
    if "codec" in only:
        print(tabulate(bench_codec(args.n, args.repeat, rng),
                       ["operation", "fmtsim ns/el", "peer ns/el", "peer/fmtsim", "peer"],
                       disable_numparse=True))
        print()
    if "element" in only:
        print(tabulate(bench_element(args.n, args.repeat, rng),
                       ["operation (one thread)", "fmtsim ns/el", "peer", "peer ns/el", "peer/fmtsim",
                        "memcpy ns/el"], disable_numparse=True))
        print()
    if "wide" in only:
        print(tabulate(bench_wide(min(args.n, 1 << 22), args.repeat, rng),
                       ["operation (one thread)", "fmtsim ns/el", "peer", "peer ns/el", "peer/fmtsim"],
                       disable_numparse=True))
        print()
    if "tables" in only:
        print(tabulate(bench_tables(), ["table", "time"], disable_numparse=True))
        print()
    if "memory" in only:
        print(tabulate(bench_memory(args.n, rng), ["measure", "value"], disable_numparse=True))
        print()
    if "block" in only:
        print(tabulate(bench_block(args.block_n, args.repeat, rng),
                       ["operation", "fmtsim ns/el", "peer ns/el", "peer/fmtsim", "peer"], disable_numparse=True))
        print()
    if "mma" in only:
        print(tabulate(bench_mma(args.repeat, rng),
                       ["GEMM (unit, formats, MxNxK)", "fmtsim ns/product", "peer ns/product", "peer/fmtsim", "peer"],
                       disable_numparse=True))
        print()
    if "mma-scale" in only:
        print(f"load average before: {_load()} on {os.cpu_count()} cores")
        print(tabulate(bench_mma_scale(args.repeat, rng, cores=args.cores),
                       ["GEMM (unit, MxNxK)", "numpy engine ns/product", "jobs=1 ns/product", "jobs=2 ns/product",
                        "speed-up",
                        "BLAS f64 ns/product", "fmtsim/BLAS time",
                        f"8192^3: jobs=1 / jobs=2 / {args.cores} cores", "load avg"],
                       disable_numparse=True))
        print("(ns/product and ratios: median (min-max) over interleaved repetitions; numpy engine: one process, "
              "engine='numpy'; jobs=1 / jobs=2: the default engine (named), which the speed-up, BLAS and 8192^3 "
              f"columns use; per core is the jobs=1 column; {args.cores} cores: the jobs=1 time divided by "
              f"{args.cores}, tiles being independent)\n")
    if "conformance" in only:
        print(tabulate(bench_conformance(), ["command", "wall time", "status"], disable_numparse=True))
        print()
    if "checkpoint" in only:
        print(tabulate(bench_checkpoint(args.checkpoint_gb, keep=False), ["operation", "throughput", "memory"],
                       disable_numparse=True))
        print()
    if "compare" in only:
        print(tabulate(bench_compare(args.repeat, rng), ["fmtsim compare scheme (4096 x 4096)", "M weights/s",
                                                         "7B weights, one process", "numpy/fmtsim (int4 g32)"],
                       disable_numparse=True))
        print("(the error metrics included; median over interleaved repetitions; numpy: the same int4 per-group "
              "quantize-dequantize written ad hoc, no metrics)\n")
    if "dequantize" in only:
        print(tabulate(bench_dequantize(args.repeat), ["dequantize (input MB/s)", "fmtsim", "numpy+ml_dtypes",
                                                       "peer/fmtsim", "note"], disable_numparse=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
