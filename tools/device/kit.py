"""The device kit's driver: prepares operands from fmtsim's vectors and probe sets, runs the
compiled ``fmtsim_kit`` binary (tools/device/fmtsim_kit.cu) on the GPU, hands the results to
``fmtsim ver`` and ``fmtsim probe infer``, and writes one report.

    python tools/device/kit.py --bin BUILD/fmtsim_kit --out REPORT_DIR [--only cvt|layout|probe|gemm] [--quick]
                               [--kernel NAME ...]

run.sh builds the binary for the GPU it finds and calls this. Steps, in order:

1. ``info``: device name, compute capability, driver and runtime versions.
2. Conversions: every ``cvt`` the binary has, on the vector files ``fmtsim gen`` writes for that
   conversion under the ``ptx`` profile (encodes) or on the shipped ``*_to_f32.decode_all`` files
   (decodes); each through ``fmtsim ver --ignore-flags`` (GPUs report no flags).
3. Layout self-check of every matrix kernel: operands where each output has exactly ONE nonzero
   product (so any accumulation model gives the same, exact, answer) that still visits every
   (row, k) of A, every (k, column) of B and every block scale. A kernel whose packing is wrong
   fails here, before its outputs are read as evidence about the unit. Where the PTX ISA text admits
   several packings (block-scale registers, FP4/FP6 containers, the wgmma descriptor's strides)
   each candidate VARIANT is tried and the one that passes is kept and reported. The operands'
   one product is small (at most 3 x 3, a few significant bits), so D is exact in fp16 too, for
   the kernels whose C and D are fp16.
4. Probes: ``fmtsim probe gen`` sets on every kernel that takes their formats, each D through
   ``fmtsim probe infer`` (which names the unit the outputs fit). The sm_120 block-scaled FP4 set
   set ``sm120_mxf4nvf4`` and the other block-scaled FP4 sets run first where the GPU is an sm_120
   (the open F = 25 / F = 35 question in the README).
5. GEMM vector files whose operand formats a kernel takes, through ``fmtsim ver`` (bit for bit
   against the named unit the file was made for, and with ``--family-tolerance``).

``--quick`` is a first look for a GPU lent for minutes: one vector file per conversion (its
first, in name order) and one GEMM file per kernel (the first made for a unit modelling it);
the layout self-check and the probes run in full, since the probes are the evidence about the
unit.

``--kernel NAME`` (repeatable) runs steps 3 to 5 on the kernels of those binary names only (every
operand combination of that name), e.g. to re-run one kernel after a fix; the conversions are not
affected.

The report (report.md, report.json) lists every step's verdict and the tools' own output.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import fmtsim
from fmtsim.conformance.run import find_vectors

# kernel -> (operand formats a, b, scale format, block size, instruction M, K, variants to try)
# element type numbers for the f8f6f4 kinds (fmtsim_kit.cu): 0 e4m3, 1 e5m2, 2 e3m2, 3 e2m3, 4 e2m1
TYPE_ID = {"e4m3": 0, "e5m2": 1, "e3m2": 2, "e2m3": 3, "e2m1": 4}


@dataclass(frozen=True)
class Kernel:
    name: str           # the binary's kernel name
    a_format: str
    b_format: str
    m: int              # instruction shape
    k: int
    scale_format: str | None = None
    block_size: int | None = None
    variants: tuple[int, ...] = (0,)
    arch: str = ""      # where the instruction exists (for the report)
    units: tuple[str, ...] = ()  # fmtsim units modelling it (GEMM files to run)
    c_format: str = "fp32"  # the instruction's C and D: fp16 for the .f16 forms (the binary still
    #                         reads and writes float32; C must be fp16 values)

    def label(self) -> str:
        s = f"{self.name}[{self.a_format}x{self.b_format}"
        return s + (f", {self.scale_format}x{self.block_size}]" if self.scale_format else "]")


def _f8f6f4(a: str, b: str, scaled: bool) -> Kernel:
    types = TYPE_ID[a] << 8 | TYPE_ID[b] << 11
    narrow = a in ("e2m1", "e3m2", "e2m3") or b in ("e2m1", "e3m2", "e2m3")
    containers = (0, 1) if narrow else (0,)
    scale_packings = (0, 1, 2) if scaled else (0,)
    variants = tuple(types | c | s << 1 for s in scale_packings for c in containers)
    if scaled:
        return Kernel("mma_mxf8f6f4", a, b, 16, 32, "e8m0", 32, variants, "sm_120a",
                      ("sm120_mxf8f6f4", "sm100_mxf8f6f4"))
    return Kernel("mma_f8f6f4", a, b, 16, 32, None, None, variants, "sm_120a", ("sm120_f8f6f4", "sm100_f8f6f4"))


KERNELS: list[Kernel] = [
    *(Kernel(f"mma_sync_{a}_{b}", a, b, 16, 32, arch="sm_89+", units=("sm89_mma_fp8",))
      for a in ("e4m3", "e5m2") for b in ("e4m3", "e5m2")),
    Kernel("mma_sync_f16", "fp16", "fp16", 16, 16, arch="sm_80+", units=("sm80_mma_fp16", "sm90_mma_fp16")),
    Kernel("mma_sync_bf16", "bf16", "bf16", 16, 16, arch="sm_80+", units=("sm80_mma_fp16", "sm90_mma_fp16")),
    Kernel("mma_sync_f16_f16", "fp16", "fp16", 16, 16, arch="sm_80+",
           units=("sm80_mma_fp16_f16", "sm90_mma_fp16_f16"), c_format="fp16"),
    *(Kernel(f"mma_sync_{a}_{b}_f16", a, b, 16, 32, arch="sm_89+ (PTX ISA 8.7)", units=("sm89_mma_fp8_f16",),
             c_format="fp16") for a in ("e4m3", "e5m2") for b in ("e4m3", "e5m2")),
    # tf32: A and B are tf32 codes here (fp32 pattern >> 13); run_kernel hands the binary the fp32 patterns
    Kernel("mma_sync_tf32", "tf32", "tf32", 16, 8, arch="sm_80+", units=("sm80_mma_tf32", "sm90_mma_tf32")),
    *(Kernel(f"wgmma_{a}_{b}", a, b, 64, 32, variants=(0, 1), arch="sm_90a", units=("sm90_wgmma_fp8",))
      for a in ("e4m3", "e5m2") for b in ("e4m3", "e5m2")),
    Kernel("wgmma_f16", "fp16", "fp16", 64, 16, variants=(0, 1), arch="sm_90a", units=("sm90_wgmma_fp16",)),
    Kernel("wgmma_bf16", "bf16", "bf16", 64, 16, variants=(0, 1), arch="sm_90a", units=("sm90_wgmma_fp16",)),
    *(_f8f6f4(a, b, False) for a, b in [("e4m3", "e4m3"), ("e5m2", "e4m3"), ("e4m3", "e5m2"), ("e5m2", "e5m2"),
                                        ("e3m2", "e2m3"), ("e3m2", "e3m2"), ("e2m3", "e2m3"), ("e2m1", "e2m1"),
                                        ("e2m1", "e5m2")]),
    *(_f8f6f4(a, b, True) for a, b in [("e4m3", "e4m3"), ("e2m1", "e5m2"), ("e5m2", "e5m2"), ("e2m1", "e2m1")]),
    Kernel("mma_mxf4", "e2m1", "e2m1", 16, 64, "e8m0", 32, (0, 2, 4), "sm_120a", ("sm120_mxf4", "sm100_mxf4")),
    Kernel("mma_mxf4nvf4_ue8m0x32", "e2m1", "e2m1", 16, 64, "e8m0", 32, (0, 2, 4), "sm_120a",
           ("sm120_mxf4nvf4", "sm100_mxf4nvf4")),
    Kernel("mma_mxf4nvf4_ue4m3x16", "e2m1", "e2m1", 16, 64, "ue4m3", 16, (0, 2, 4), "sm_120a",
           ("sm120_mxf4nvf4", "sm100_mxf4nvf4")),
]

# probe set -> kernels that take its formats (fmtsim.mma.probe.PROBE_SETS names)
PROBE_KERNELS = {
    "fp8": ["mma_sync_e4m3_e4m3", "wgmma_e4m3_e4m3", "mma_f8f6f4[e4m3xe4m3]"],
    "fp16": ["mma_sync_f16", "wgmma_f16"],
    "bf16": ["mma_sync_bf16", "wgmma_bf16"],
    "fp16_f16": ["mma_sync_f16_f16"],
    "fp8_f16": ["mma_sync_e4m3_e4m3_f16"],
    "tf32": ["mma_sync_tf32"],
    "fp4": ["mma_f8f6f4[e2m1xe2m1]"],
    "mxfp8": ["mma_mxf8f6f4[e4m3xe4m3, e8m0x32]"],
    "mxfp4": ["mma_mxf4[e2m1xe2m1, e8m0x32]", "mma_mxf4nvf4_ue8m0x32[e2m1xe2m1, e8m0x32]"],
    "nvfp4": ["mma_mxf4nvf4_ue4m3x16[e2m1xe2m1, ue4m3x16]"],
    # the open question (README, "Where the references disagree"): F = 25 or F = 35, grouped or not
    "sm120_mxf4nvf4": ["mma_mxf4nvf4_ue8m0x32[e2m1xe2m1, e8m0x32]", "mma_mxf4[e2m1xe2m1, e8m0x32]"],
}
# probe sets the kit has no kernel for (E4M3FNUZ is AMD's): listed in the report
NO_KERNEL_YET = ("fp8fnuz",)

CODE_DTYPE = {"fp16": np.uint16, "bf16": np.uint16, "tf32": np.uint32}
TF32_SHIFT = 13  # a tf32 code is the fp32 pattern's 19 high bits (fmtsim.mma.arith.TF32)


def _fmt_for_decode(name: str) -> str:
    return {"fp16": "float16", "bf16": "bfloat16"}.get(name, name)


def decode_values(codes: np.ndarray, fmt: str) -> np.ndarray:
    """Exact float64 values of operand codes (fp16/bf16 as their bits)."""
    if fmt == "fp16":
        return codes.astype(np.uint16).view(np.float16).astype(np.float64)
    if fmt == "bf16":
        return (codes.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if fmt == "tf32":
        return (codes.astype(np.uint32) << TF32_SHIFT).view(np.float32).astype(np.float64)
    return fmtsim.decode(codes, fmt, dtype=np.float64)


def tf32_codes_from_patterns(patterns: np.ndarray, what: str) -> np.ndarray:
    """tf32 codes of fp32 patterns holding tf32 values (``fmtsim probe gen`` writes those); a
    pattern with any of its 13 low bits set is no tf32 value and is refused."""
    p = np.asarray(patterns).astype(np.uint32)
    if np.any(p & ((1 << TF32_SHIFT) - 1)):
        raise ValueError(f"{what}: fp32 patterns with nonzero low {TF32_SHIFT} bits are not tf32 values")
    return p >> TF32_SHIFT


def fp16_representable(c: np.ndarray) -> np.ndarray:
    """Per element: the float32 value is an fp16 value (NaN and Inf count as such)."""
    c32 = np.asarray(c, dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        back = c32.astype(np.float16).astype(np.float32)
    return (back == c32) | np.isnan(c32)


@dataclass
class Report:
    out: Path
    info: dict[str, Any] = field(default_factory=dict)
    sections: list[tuple[str, list[dict[str, Any]]]] = field(default_factory=list)

    def add(self, section: str, row: dict[str, Any]) -> None:
        for name, rows in self.sections:
            if name == section:
                rows.append(row)
                break
        else:
            self.sections.append((section, [row]))
        print(f"[{section}] " + "  ".join(f"{k}={v}" for k, v in row.items() if k != "output"), flush=True)

    def write(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        data = {"info": self.info, "sections": {name: rows for name, rows in self.sections}}
        _atomic(self.out / "report.json", json.dumps(data, indent=1) + "\n")
        lines = ["# fmtsim device kit report", ""]
        lines += [f"- {k}: {v}" for k, v in self.info.items()]
        for name, rows in self.sections:
            lines += ["", f"## {name}", "", "| what | verdict | detail |", "|---|---|---|"]
            for r in rows:
                lines.append(f"| {r.get('what', '')} | {r.get('verdict', '')} | {r.get('detail', '')} |")
            outs = [r for r in rows if r.get("output")]
            for r in outs:
                lines += ["", f"### {r['what']}", "", "```", r["output"].rstrip(), "```"]
        _atomic(self.out / "report.md", "\n".join(lines) + "\n")


def _atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(text)
    os.replace(tmp, path)


def _fmtsim(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fmtsim", *args], capture_output=True, text=True)


def _kit(binary: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(binary), *map(str, args)], capture_output=True, text=True)


# ---- conversions ------------------------------------------------------------------------------

def _read_tv_inputs(path: Path) -> list[str]:
    return [line.split()[0] for line in path.read_text().splitlines() if line.strip()]


def run_conversions(binary: Path, work: Path, rep: Report, quick: bool = False) -> None:
    listed = _kit(binary, "list").stdout.split("\n")
    ops = [ln.split()[1] for ln in listed if ln.startswith("cvt ")]
    shipped = find_vectors()
    for op in ops:
        vec_dir = work / "vec" / op
        vec_dir.mkdir(parents=True, exist_ok=True)
        if op.endswith("_to_f32"):  # decode: the shipped every-code file
            assert shipped is not None
            names = [f"{op}.decode_all.tv"]
            shutil.copy(shipped / names[0], vec_dir / names[0])
            shutil.copy(shipped / "manifest.json", vec_dir / "manifest.json")
        else:
            conv, rounding, overflow = op.split(".")
            g = _fmtsim("gen", conv, "--rounding", rounding, "--overflow", overflow, "--profile", "ptx",
                        "-o", str(vec_dir))
            if g.returncode != 0:
                rep.add("conversions", {"what": op, "verdict": "not generated", "detail": g.stderr.strip()})
                continue
            names = sorted(p.name for p in vec_dir.glob("*.tv"))
        for name in names[:1] if quick else names:
            inputs = _read_tv_inputs(vec_dir / name)
            vals = np.array([int(h, 16) for h in inputs], dtype=np.uint32)
            n = vals.size + (vals.size % 2)
            raw = np.zeros(n, dtype=np.uint32)
            raw[:vals.size] = vals
            if op.startswith("bf16_") or op.startswith("f16_"):
                raw &= 0xFFFF
            (work / "in.bin").write_bytes(raw.tobytes())
            r = _kit(binary, "cvt", op, work / "in.bin", work / "out.bin", n)
            if r.returncode == 4:
                rep.add("conversions", {"what": name, "verdict": "unsupported on this GPU"})
                break
            if r.returncode != 0:
                rep.add("conversions", {"what": name, "verdict": "kit error", "detail": r.stderr.strip()})
                break
            out = np.frombuffer((work / "out.bin").read_bytes(), dtype=np.uint32)[:vals.size]
            width = 8 if op.endswith("_to_f32") else 2
            lines = [f"{i} {int(c):0{width}X}" for i, c in zip(inputs, out, strict=True)]
            res = work / f"{name}.device"
            res.write_text("\n".join(lines) + "\n")
            v = _fmtsim("ver", name, str(res), "--vectors", str(vec_dir), "--ignore-flags")
            verdict = "pass" if v.returncode == 0 else ("FAIL" if v.returncode == 1 else "ver error")
            rep.add("conversions", {"what": name, "verdict": verdict, "detail": v.stdout.strip().splitlines()[-1:]
                                    and v.stdout.strip().splitlines()[-1], "output": v.stdout + v.stderr
                                    if verdict != "pass" else ""})


# ---- matrix kernels ----------------------------------------------------------------------------

def _pad(x: np.ndarray, rows: int, cols: int) -> np.ndarray:
    out = np.zeros((rows, cols), dtype=x.dtype)
    out[:x.shape[0], :x.shape[1]] = x
    return out


def _up(n: int, m: int) -> int:
    return -(-n // m) * m


def run_kernel(binary: Path, kern: Kernel, variant: int, work: Path, a: np.ndarray, b: np.ndarray,
               c: np.ndarray, sa: np.ndarray | None = None, sb: np.ndarray | None = None) -> np.ndarray | str:
    """D (float32, a.shape[0] x b.shape[1]) from the GPU, or the reason there is none. Pads M to the
    instruction's M, N to 8 and K to the instruction's K with zero codes (scales 1.0)."""
    m, k = a.shape
    n = b.shape[1]
    mp, np_, kp = _up(m, kern.m), _up(n, 8), _up(k, kern.k)
    dt = CODE_DTYPE.get(kern.a_format, np.uint8)
    if kern.c_format == "fp16" and not fp16_representable(c).all():
        return "refused: this kernel's C is fp16 and C holds values fp16 cannot (the kernel would round them)"
    if kern.a_format == "tf32":  # the binary takes the fp32 patterns of the tf32 values
        if np.any(np.asarray(a) >= 1 << 19) or np.any(np.asarray(b) >= 1 << 19):
            return "refused: tf32 codes are 19 bits (pass fp32 patterns through tf32_codes_from_patterns)"
        a = np.asarray(a).astype(np.uint32) << TF32_SHIFT
        b = np.asarray(b).astype(np.uint32) << TF32_SHIFT
    job = work / "job"
    if job.exists():
        shutil.rmtree(job)
    job.mkdir(parents=True)
    (job / "a.bin").write_bytes(_pad(a.astype(dt), mp, kp).tobytes())
    (job / "b.bin").write_bytes(_pad(b.astype(dt), kp, np_).tobytes())
    (job / "c.bin").write_bytes(_pad(c.astype(np.float32), mp, np_).tobytes())
    if kern.scale_format:
        one = 0x7F if kern.scale_format == "e8m0" else 0x38  # 1.0
        bs = kern.block_size or 32
        sap = np.full((mp, kp // bs), one, dtype=np.uint8)
        sbp = np.full((kp // bs, np_), one, dtype=np.uint8)
        assert sa is not None and sb is not None
        sap[:sa.shape[0], :sa.shape[1]] = sa
        sbp[:sb.shape[0], :sb.shape[1]] = sb
        (job / "sa.bin").write_bytes(sap.tobytes())
        (job / "sb.bin").write_bytes(sbp.tobytes())
    r = _kit(binary, "mma", kern.name, job, mp, np_, kp, hex(variant))
    if r.returncode == 4:
        return "unsupported on this GPU"
    if r.returncode != 0:
        return "kit error: " + r.stderr.strip()
    d = np.frombuffer((job / "d.bin").read_bytes(), dtype=np.float32).reshape(mp, np_)
    return d[:m, :n].copy()


def _codes_for(fmt: str, values: np.ndarray) -> np.ndarray:
    if fmt == "fp16":
        return values.astype(np.float16).view(np.uint16)
    if fmt == "bf16":
        return (values.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    if fmt == "tf32":  # the values are tf32 values: the 13 dropped bits are zero
        return tf32_codes_from_patterns(values.astype(np.float32).view(np.uint32), "tf32 operand")
    return fmtsim.encode(values.astype(np.float32), fmt)


def layout_operands(kern: Kernel, seed: int = 3) -> dict[str, np.ndarray]:
    """One nonzero product per output, visiting every (row, k) of A, every (k, column) of B and
    every block scale; D is exact whatever the unit's accumulation (one term, C = 0)."""
    rng = np.random.default_rng(seed)
    K = kern.k * 2  # two instructions along K: the chaining is exercised too
    P, N = kern.m * K, 8
    p = np.arange(P)
    kk = (p % kern.m + p // kern.m) % K  # tile row i of tile t uses k = (i + t) mod K
    small = np.array([0.5, 1.0, 1.5, 2.0, 3.0]) if "e2m1" in (kern.a_format, kern.b_format) else \
        np.array([0.5, 1.0, 1.25, 1.5, 1.75, 2.0, 3.0])
    av = np.zeros((P, K))
    av[p, kk] = rng.choice(small, P) * rng.choice([-1.0, 1.0], P)
    bv = rng.choice(small, (K, N)) * rng.choice([-1.0, 1.0], (K, N))
    out = {"a": _codes_for(kern.a_format, av), "b": _codes_for(kern.b_format, bv), "c": np.zeros((P, N), np.float32)}
    if kern.scale_format:
        bs = kern.block_size or 32
        exps = np.arange(-3, 4)
        ea = rng.choice(exps, (P, K // bs))
        eb = rng.choice(exps, (K // bs, N))
        out["sa"] = fmtsim.encode(np.exp2(ea).astype(np.float32), kern.scale_format)
        out["sb"] = fmtsim.encode(np.exp2(eb).astype(np.float32), kern.scale_format)
    return out


def expected_single_product(kern: Kernel, ops: dict[str, np.ndarray]) -> np.ndarray:
    av = decode_values(ops["a"], kern.a_format)
    bv = decode_values(ops["b"], kern.b_format)
    if kern.scale_format:
        bs = kern.block_size or 32
        sa = np.repeat(fmtsim.decode(ops["sa"], kern.scale_format, dtype=np.float64), bs, axis=1)
        sb = np.repeat(fmtsim.decode(ops["sb"], kern.scale_format, dtype=np.float64), bs, axis=0)
        av, bv = av * sa, bv * sb
    d = (av @ bv + ops["c"]).astype(np.float32)  # one nonzero term per output: exact
    return d


def layout_check(binary: Path, work: Path, rep: Report, kernels: list[Kernel] | None = None
                 ) -> dict[str, tuple[Kernel, int]]:
    """kernel label -> (kernel, the variant whose packing passed), for ``kernels`` (default: every kernel)."""
    good: dict[str, tuple[Kernel, int]] = {}
    for kern in KERNELS if kernels is None else kernels:
        ops = layout_operands(kern)
        want = expected_single_product(kern, ops)
        tried = []
        for var in kern.variants:
            d = run_kernel(binary, kern, var, work, ops["a"], ops["b"], ops["c"], ops.get("sa"), ops.get("sb"))
            if isinstance(d, str):
                rep.add("layout self-check", {"what": kern.label(), "verdict": d, "detail": kern.arch})
                break
            bad = int(np.count_nonzero(d.view(np.uint32) != want.view(np.uint32)))
            tried.append(f"variant {var:#x}: {bad} of {want.size} wrong")
            if bad == 0:
                good[kern.label()] = (kern, var)
                rep.add("layout self-check", {"what": kern.label(), "verdict": "pass",
                                              "detail": f"variant {var:#x} ({'; '.join(tried)})"})
                break
        else:
            rep.add("layout self-check", {"what": kern.label(), "verdict": "FAIL",
                                          "detail": "; ".join(tried) + ": no packing candidate matches; "
                                          "outputs of this kernel are not used"})
    return good


def _probe_arrays(probe_dir: Path, name: str) -> dict[str, np.ndarray]:
    meta = json.loads((probe_dir / "probe.json").read_text())["sets"][name]
    raw = (probe_dir / meta["file"]).read_bytes()
    return {a["name"]: np.frombuffer(raw, dtype="<" + a["dtype"], count=int(np.prod(a["shape"])),
                                     offset=a["offset"]).reshape(a["shape"]) for a in meta["arrays"]}


def run_probes(binary: Path, work: Path, good: dict[str, tuple[Kernel, int]], rep: Report, cc: str) -> None:
    probe_dir = work / "probes"
    g = _fmtsim("probe", "gen", "-o", str(probe_dir))
    if g.returncode != 0:
        rep.add("probes", {"what": "fmtsim probe gen", "verdict": "error", "detail": g.stderr.strip()})
        return
    sets = list(PROBE_KERNELS)
    if cc.startswith("12"):  # sm_120: the open block-scaled FP4 question first
        first = ["sm120_mxf4nvf4", "nvfp4", "mxfp4"]
        sets = first + [s for s in sets if s not in first]
    for name in NO_KERNEL_YET:
        rep.add("probes", {"what": name, "verdict": "no kernel in the kit yet"})
    for name in sets:
        arrays = _probe_arrays(probe_dir, name)
        for label in PROBE_KERNELS[name]:
            hits = [v for k, v in good.items() if k == label or k.startswith(label + "[")]
            if not hits:
                continue
            kern, var = hits[0]
            a, b = arrays["a"], arrays["b"]
            if kern.a_format == "tf32":  # probe gen writes tf32 operands as the fp32 patterns
                a, b = tf32_codes_from_patterns(a, f"{name} a"), tf32_codes_from_patterns(b, f"{name} b")
            d = run_kernel(binary, kern, var, work, a, b, arrays["c"], arrays.get("a_scales"), arrays.get("b_scales"))
            if isinstance(d, str):
                rep.add("probes", {"what": f"{name} on {kern.label()}", "verdict": d})
                continue
            kdir = work / "probe_results" / kern.name
            kdir.mkdir(parents=True, exist_ok=True)
            res = kdir / f"probe.{name}.d.bin"
            res.write_bytes(d.astype("<f4").tobytes())
            inf = _fmtsim("probe", "infer", str(res), "--probes", str(probe_dir))
            first = next((ln for ln in inf.stdout.splitlines() if "named" in ln.lower() or "unit" in ln.lower()),
                         inf.stdout.strip().splitlines()[0] if inf.stdout.strip() else inf.stderr.strip())
            rep.add("probes", {"what": f"{name} on {kern.label()}", "verdict": "inferred" if inf.returncode == 0
                               else f"exit {inf.returncode}", "detail": first, "output": inf.stdout + inf.stderr})


def run_gemm_files(binary: Path, work: Path, good: dict[str, tuple[Kernel, int]], rep: Report,
                   quick: bool = False) -> None:
    shipped = find_vectors()
    assert shipped is not None
    manifest = json.loads((shipped / "manifest.json").read_text())["files"]
    done: set[str] = set()  # kernels that have run a file (--quick: one each)
    for fname, meta in sorted(manifest.items()):
        if not fname.endswith(".gemm.bin"):
            continue
        for kern, var in good.values():
            if (kern.a_format, kern.b_format, kern.scale_format, kern.block_size) != \
                    (meta["a_format"], meta["b_format"], meta["scale_format"], meta["block_size"]):
                continue
            if kern.c_format == "fp16" and meta["unit"].get("c_format") != "fp16":
                continue  # the file's C is fp32: an fp16-C kernel cannot take it
            if quick and (kern.label() in done or meta["unit"]["name"] not in kern.units):
                continue
            done.add(kern.label())
            raw = bytearray((shipped / fname).read_bytes())
            arr = {a["name"]: np.frombuffer(bytes(raw), dtype="<" + a["dtype"], count=int(np.prod(a["shape"])),
                                            offset=a["offset"]).reshape(a["shape"]) for a in meta["arrays"]}
            d = run_kernel(binary, kern, var, work, arr["a_codes"], arr["b_codes"], arr["c"],
                           arr.get("a_scales"), arr.get("b_scales"))
            if isinstance(d, str):
                rep.add("gemm files", {"what": f"{fname} on {kern.label()}", "verdict": d})
                continue
            dmeta = next(a for a in meta["arrays"] if a["name"] == "d")
            raw[dmeta["offset"]:dmeta["offset"] + dmeta["nbytes"]] = d.astype("<f4").tobytes()
            dev = work / "gemm" / kern.name / fname
            dev.parent.mkdir(parents=True, exist_ok=True)
            dev.write_bytes(bytes(raw))
            exact = _fmtsim("ver", fname, str(dev))
            fam = _fmtsim("ver", fname, str(dev), "--family-tolerance")
            verdict = ("bit-exact vs " + meta["unit"]["name"]) if exact.returncode == 0 else \
                ("within family tolerance" if fam.returncode == 0 else "FAIL")
            last = (exact.stdout.strip().splitlines() or [""])[-1]
            rep.add("gemm files", {"what": f"{fname} on {kern.label()}", "verdict": verdict, "detail": last,
                                   "output": "" if exact.returncode == 0 else exact.stdout + fam.stdout})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True, type=Path, help="the built fmtsim_kit binary")
    ap.add_argument("--out", required=True, type=Path, help="where report.md and report.json go")
    ap.add_argument("--only", choices=["cvt", "layout", "probe", "gemm"], action="append",
                    help="run only these steps (repeatable; default all)")
    ap.add_argument("--quick", action="store_true",
                    help="one vector file per conversion and one GEMM file per kernel (probes in full)")
    ap.add_argument("--kernel", action="append", metavar="NAME",
                    help="run the layout self-check, probes and GEMM files on the kernels of this binary name "
                         "only (repeatable; default all)")
    args = ap.parse_args(argv)
    steps = set(args.only or ["cvt", "layout", "probe", "gemm"])
    names = {k.name for k in KERNELS}
    unknown = sorted(set(args.kernel or ()) - names)
    if unknown:
        ap.error(f"--kernel: no kernel named {', '.join(unknown)} (the kit has {', '.join(sorted(names))})")
    kernels = None if args.kernel is None else [k for k in KERNELS if k.name in args.kernel]
    rep = Report(args.out)
    info = _kit(args.bin, "info")
    if info.returncode != 0:
        print(f"kit.py: {args.bin} info failed: {info.stderr.strip()}", file=sys.stderr)
        return 2
    rep.info = json.loads(info.stdout)
    rep.info["fmtsim"] = fmtsim.__version__
    if args.kernel is not None:  # a partial report says so
        rep.info["kernels"] = ", ".join(sorted(set(args.kernel)))
    with tempfile.TemporaryDirectory(prefix="fmtsim-kit-") as tmp:
        work = Path(tmp)
        try:
            if "cvt" in steps:
                run_conversions(args.bin, work, rep, args.quick)
            good = layout_check(args.bin, work, rep, kernels) if steps & {"layout", "probe", "gemm"} else {}
            if "probe" in steps:
                run_probes(args.bin, work, good, rep, rep.info.get("cc", ""))
            if "gemm" in steps:
                run_gemm_files(args.bin, work, good, rep, args.quick)
        finally:
            rep.write()
    print(f"kit.py: report in {args.out / 'report.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
