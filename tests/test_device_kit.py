"""The device kit (tools/device): it builds for every target with nvcc, each instruction lands in the
target it belongs to, the layout self-check's premise holds on every modelled unit, and the driver
runs end to end against a simulated device."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fmtsim import mma

ROOT = Path(__file__).resolve().parent.parent
KIT = ROOT / "tools" / "device"
sys.path.insert(0, str(KIT))

import kit  # noqa: E402

NVCC = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc not found: the CUDA toolkit is needed to build the kit")

# target -> instructions its PTX must hold (the guards must not drop them) and ones it must not
TARGETS = {
    "89": (["cvt.rn.satfinite.e4m3x2.f32", "cvt.rn.f16x2.e5m2x2", "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32",
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16",
            "mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16",
            "mma.sync.aligned.m16n8k32.row.col.f16.e5m2.e4m3.f16",
            "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", "cvt.rna.tf32.f32"],
           ["wgmma.mma_async", "e2m1x2", "kind::"]),
    "90a": (["wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3",
             "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16", "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16",
             "mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e5m2.f16"], ["e2m1x2", "ue8m0x2", "kind::"]),
    "100a": (["cvt.rn.satfinite.e2m1x2.f32", "cvt.rp.satfinite.ue8m0x2.f32", "cvt.rz.ue8m0x2.bf16x2",
              "cvt.rn.bf16x2.ue8m0x2", "cvt.rn.f16x2.e3m2x2"], ["wgmma.mma_async", "kind::"]),
    "120a": (["kind::f8f6f4.f32.e2m1.e2m1.f32", "kind::mxf8f6f4.block_scale.scale_vec::1X",
              "kind::mxf4.block_scale.scale_vec::2X", "kind::mxf4nvf4.block_scale.scale_vec::4X",
              "cvt.rn.satfinite.e2m3x2.f32", "mma.sync.aligned.m16n8k32.row.col.f16.e5m2.e5m2.f16",
              "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"], ["wgmma.mma_async"]),
}


def _ptx(target: str, tmp_path: Path) -> str:
    out = tmp_path / f"kit_{target}.ptx"
    r = subprocess.run([NVCC, "-std=c++17", "--ptx", "-gencode", f"arch=compute_{target},code=sm_{target}",
                        "-o", str(out), str(KIT / "fmtsim_kit.cu")], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return out.read_text()


@needs_nvcc
@pytest.mark.parametrize("target", ["120a"])
def test_each_instruction_is_in_its_target(target, tmp_path):
    want, unwanted = TARGETS[target]
    ptx = _ptx(target, tmp_path)
    for ins in want:
        assert ins in ptx, f"sm_{target}: {ins} missing from the PTX (an architecture guard dropped it)"
    for ins in unwanted:
        assert ins not in ptx, f"sm_{target}: {ins} compiled where it does not exist"


@needs_nvcc
@pytest.mark.slow
@pytest.mark.parametrize("target", list(TARGETS))
def test_kit_builds_for_every_target(target, tmp_path):
    """The whole build, ptxas included (it is what refuses an instruction a target lacks)."""
    want, unwanted = TARGETS[target]
    ptx = _ptx(target, tmp_path)
    assert all(ins in ptx for ins in want) and not any(ins in ptx for ins in unwanted)
    r = subprocess.run([NVCC, "-std=c++17", "-O2", "-gencode", f"arch=compute_{target},code=sm_{target}",
                        "-o", str(tmp_path / "fmtsim_kit"), str(KIT / "fmtsim_kit.cu")],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr


# kernel family -> the modelled units whose arithmetic the one-product operands must not depend on
UNITS_FOR = {"fp8": ["exact", "sm89_mma_fp8", "sm90_wgmma_fp8", "sm100_f8f6f4"],
             "fp16": ["exact", "sm90_wgmma_fp16", "cdna3_mfma_fp16"],
             # fp16 C and D: the one product must be exact in fp16 (rne_fp16 output on these units)
             "fp16_f16": ["sm80_mma_fp16_f16", "sm90_mma_fp16_f16", "sm90_wgmma_fp16_f16"],
             "fp8_f16": ["sm89_mma_fp8_f16", "sm90_wgmma_fp8_f16"],
             "tf32": ["exact", "sm80_mma_tf32", "sm90_mma_tf32", "sm100_tf32"],
             "narrow": ["exact", "sm100_f8f6f4"], "mx": ["sm100_mxf8f6f4"], "mxf4": ["sm100_mxf4", "sm100_mxf4nvf4"],
             "nvf4": ["sm100_mxf4nvf4"]}


def _family(k: kit.Kernel) -> str:
    if k.name.startswith("mma_mxf4nvf4_ue4m3"):
        return "nvf4"
    if k.name.startswith(("mma_mxf4", "mma_mxf4nvf4")):
        return "mxf4"
    if k.scale_format:
        return "mx"
    if k.c_format == "fp16":
        return "fp16_f16" if k.a_format == "fp16" else "fp8_f16"
    if k.a_format == "tf32":
        return "tf32"
    if k.a_format in ("fp16", "bf16"):
        return "fp16"
    if {k.a_format, k.b_format} <= {"e4m3", "e5m2"}:
        return "fp8"
    return "narrow"


@pytest.mark.parametrize("kern", kit.KERNELS, ids=[k.label() for k in kit.KERNELS])
def test_layout_operands_are_exact_on_every_unit(kern):
    """The self-check's premise: one nonzero product per output gives the same exact D on every
    modelled unit, and every (row, k) of A, (k, column) of B and every block scale is visited."""
    ops = kit.layout_operands(kern)
    want = kit.expected_single_product(kern, ops)
    a_nonzero = kit.decode_values(ops["a"], kern.a_format) != 0
    assert (a_nonzero.sum(axis=1) == 1).all()
    rows_in_tile = np.arange(a_nonzero.shape[0]) % kern.m
    seen = {(int(r), int(k)) for r, k in zip(rows_in_tile, a_nonzero.argmax(axis=1), strict=True)}
    assert len(seen) == kern.m * a_nonzero.shape[1]  # every (tile row, k)
    assert (kit.decode_values(ops["b"], kern.b_format) != 0).all()
    for unit in UNITS_FOR[_family(kern)]:
        kw = {}
        if kern.scale_format:
            kw = dict(a_scales=ops["sa"], b_scales=ops["sb"], scale_format=kern.scale_format,
                      block_size=kern.block_size)
        d = mma.matmul(ops["a"], ops["b"], ops["c"], unit=unit, a_format=kern.a_format, b_format=kern.b_format, **kw)
        assert np.array_equal(d.view(np.uint32), want.view(np.uint32)), (kern.label(), unit)


def _simulated_binary(tmp_path: Path, cc: str, units: dict[str, str]) -> Path:
    exe = tmp_path / "fmtsim_kit"
    mapping = " ".join(f"{k}={v}" for k, v in units.items())
    sim = KIT / "simulated_kit.py"
    exe.write_text(f"#!/bin/sh\nexec {sys.executable} {sim} --cc {cc} --unit-map {mapping} -- \"$@\"\n")
    exe.chmod(0o755)
    return exe


# kit.py against a CPU stand-in (fmtsim's own models, wrong for all but the last packing candidate):
# it keeps the right candidate, its conversions pass ver, probe infer names the simulated unit, and
# the GEMM files of that unit are bit-exact. Evidence about kit.py only. The stand-in is an sm_90 with
# these kernels (kit name -> the fmtsim unit answering for it); every other kernel is "unsupported".
SIM_UNITS = {"mma_sync_e4m3_e4m3": "sm89_mma_fp8", "wgmma_e4m3_e4m3": "sm90_wgmma_fp8",
             "mma_mxf4nvf4_ue4m3x16": "sm100_mxf4nvf4",
             # fp16 C/D (float32 in and out of the binary) and tf32 (fp32 patterns into it)
             "mma_sync_f16_f16": "sm80_mma_fp16_f16", "mma_sync_tf32": "sm80_mma_tf32"}
# The driver's work on it, in pieces xdist can run side by side, one kit.py run each: the conversions
# (--only cvt), and the matrix steps (layout self-check, probes, GEMM files) on these groups of kernels
# (--kernel), which together hold every kernel of the kit once.
MATRIX_PIECES = {"fp8": ["mma_sync_e4m3_e4m3", "wgmma_e4m3_e4m3"], "nvfp4": ["mma_mxf4nvf4_ue4m3x16"],
                 "fp16 C and tf32": ["mma_sync_f16_f16", "mma_sync_tf32"],
                 "unmapped": [name for name in dict.fromkeys(k.name for k in kit.KERNELS) if name not in SIM_UNITS]}


def test_driver_pieces_hold_every_kernel_once():
    names = [n for piece in MATRIX_PIECES.values() for n in piece]
    assert sorted(names) == sorted({k.name for k in kit.KERNELS})


def test_driver_refuses_an_unknown_kernel(capsys):
    with pytest.raises(SystemExit) as e:
        kit.main(["--bin", "no-binary", "--out", "no-report", "--kernel", "mma_sync_e4m3_e4m3", "--kernel", "nope"])
    assert e.value.code == 2 and "--kernel: no kernel named nope" in capsys.readouterr().err


def _driver_report(tmp_path: Path, *args: str) -> dict:
    """The sections of the report of one kit.py run against the stand-in, which must exit 0 and write
    report.md too. --quick (one vector file per conversion, one GEMM file per kernel): the driver's
    logic is the same, and the stand-in's conversions and GEMMs are fmtsim's own, so more files add
    no evidence."""
    exe = _simulated_binary(tmp_path, "9.0", SIM_UNITS)
    out = tmp_path / "report"
    r = subprocess.run([sys.executable, str(KIT / "kit.py"), "--bin", str(exe), "--out", str(out), "--quick", *args],
                       capture_output=True, text=True, timeout=1800, env=dict(os.environ))
    assert r.returncode == 0, r.stdout + r.stderr
    assert (out / "report.md").read_text().startswith("# fmtsim device kit report")
    return json.loads((out / "report.json").read_text())["sections"]


def _matrix_report(tmp_path: Path, piece: str) -> tuple[dict, dict, dict]:
    """Layout, probe and GEMM-file rows by what they name, for one piece of MATRIX_PIECES."""
    names = MATRIX_PIECES[piece]
    rep = _driver_report(tmp_path, "--only", "layout", "--only", "probe", "--only", "gemm",
                         *(a for n in names for a in ("--kernel", n)))
    layout = {row["what"]: row for row in rep["layout self-check"]}
    assert set(layout) == {k.label() for k in kit.KERNELS if k.name in names}  # those kernels, all of them
    probes = {row["what"]: row for row in rep["probes"]}
    assert "fp16_f16" not in probes and probes["fp8fnuz"]["verdict"] == "no kernel in the kit yet"
    gemm = {row["what"]: row["verdict"] for row in rep.get("gemm files", [])}
    return layout, probes, gemm


@pytest.mark.slow
def test_driver_conversions_on_a_simulated_device(tmp_path):
    conv = _driver_report(tmp_path, "--only", "cvt")["conversions"]
    assert conv and all(row["verdict"] in ("pass", "unsupported on this GPU") for row in conv), conv
    assert sum(row["verdict"] == "pass" for row in conv) >= 8  # --quick: one file for each of sm_90's cvts


@pytest.mark.slow
def test_driver_fp8_kernels_on_a_simulated_device(tmp_path):
    layout, probes, gemm = _matrix_report(tmp_path, "fp8")
    assert layout["wgmma_e4m3_e4m3[e4m3xe4m3]"]["verdict"] == "pass"
    assert "variant 0x1" in layout["wgmma_e4m3_e4m3[e4m3xe4m3]"]["detail"]  # the last candidate
    assert "sm90_wgmma_fp8" in probes["fp8 on wgmma_e4m3_e4m3[e4m3xe4m3]"]["output"]
    assert gemm["sm90_wgmma_fp8.e4m3xe4m3.gemm.bin on wgmma_e4m3_e4m3[e4m3xe4m3]"] == "bit-exact vs sm90_wgmma_fp8"
    assert sum(w.endswith("on wgmma_e4m3_e4m3[e4m3xe4m3]") for w in gemm) == 1  # --quick: one file per kernel


@pytest.mark.slow
def test_driver_nvfp4_kernel_on_a_simulated_device(tmp_path):
    _, probes, _ = _matrix_report(tmp_path, "nvfp4")
    assert "sm100_mxf4nvf4" in probes["nvfp4 on mma_mxf4nvf4_ue4m3x16[e2m1xe2m1, ue4m3x16]"]["output"]


@pytest.mark.slow
def test_driver_fp16_c_and_tf32_kernels_on_a_simulated_device(tmp_path):
    layout, probes, gemm = _matrix_report(tmp_path, "fp16 C and tf32")
    for kern, unit, pset in [("mma_sync_f16_f16[fp16xfp16]", "sm80_mma_fp16_f16", "fp16_f16"),
                             ("mma_sync_tf32[tf32xtf32]", "sm80_mma_tf32", "tf32")]:
        assert layout[kern]["verdict"] == "pass", layout[kern]
        assert unit in probes[f"{pset} on {kern}"]["output"], probes[f"{pset} on {kern}"]
    f16_file = "sm80_mma_fp16_f16.fp16xfp16.gemm.bin on mma_sync_f16_f16[fp16xfp16]"
    assert gemm[f16_file] == "bit-exact vs sm80_mma_fp16_f16"
    assert gemm["sm80_mma_tf32.tf32xtf32.gemm.bin on mma_sync_tf32[tf32xtf32]"] == "bit-exact vs sm80_mma_tf32"
    assert not any(w.startswith("sm80_mma_fp16.") and "mma_sync_f16_f16" in w for w in gemm)  # fp32 C: not taken


@pytest.mark.slow
def test_driver_unmapped_kernels_on_a_simulated_device(tmp_path):
    """The kernels the stand-in has no unit for (mma_sync_f16 and mma_sync_e4m3_e4m3_f16 among them)."""
    layout, _, _ = _matrix_report(tmp_path, "unmapped")
    assert all(row["verdict"] == "unsupported on this GPU" for row in layout.values()), layout
    assert layout["mma_sync_f16[fp16xfp16]"]["verdict"] == "unsupported on this GPU"
    assert layout["mma_sync_e4m3_e4m3_f16[e4m3xe4m3]"]["verdict"] == "unsupported on this GPU"


def test_fp16_c_and_tf32_operands_are_checked(tmp_path):
    """An fp16-C kernel refuses a C fp16 cannot hold (the kernel would round it), and tf32
    operands move between fp32 patterns (probe files) and tf32 codes (GEMM files) exactly."""
    f16 = next(k for k in kit.KERNELS if k.name == "mma_sync_f16_f16")
    a = np.zeros((16, 16), np.uint16)
    b = np.zeros((16, 8), np.uint16)
    c = np.full((16, 8), 1 + 2.0 ** -11, np.float32)  # between two fp16 values
    assert kit.fp16_representable(np.array([1 + 2.0 ** -10, 65504, np.inf, np.nan, 2.0 ** -24], np.float32)).all()
    assert not kit.fp16_representable(np.array([1 + 2.0 ** -11, 65520, 2.0 ** -25], np.float32)).any()
    r = kit.run_kernel(tmp_path / "no-binary", f16, 0, tmp_path, a, b, c)
    assert isinstance(r, str) and r.startswith("refused")
    codes = np.array([0, 1, 0x1FC00, (1 << 19) - 1], np.uint32)  # 0x1FC00: 1.0
    assert np.array_equal(kit.tf32_codes_from_patterns(codes << 13, "a"), codes)
    with pytest.raises(ValueError, match="low 13 bits"):
        kit.tf32_codes_from_patterns(np.array([0x3F800001], np.uint32), "a")
    tf32 = next(k for k in kit.KERNELS if k.name == "mma_sync_tf32")
    r = kit.run_kernel(tmp_path / "no-binary", tf32, 0, tmp_path, np.full((16, 8), 1 << 19, np.uint32),
                       np.zeros((8, 8), np.uint32), np.zeros((16, 8), np.float32))
    assert isinstance(r, str) and "19 bits" in r
