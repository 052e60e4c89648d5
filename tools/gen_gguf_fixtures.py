#!/usr/bin/env python3
"""Write tests/fixtures/gguf/: GGUF test fixtures made by ggml's own C quantizers and dequantizers.

A small GGUF file holds one tensor of every ggml type, its bytes made by ggml's C quantizers,
and an .npz holds the float32 values ggml's C dequantizers give for each.

    python tools/gen_gguf_fixtures.py --llama-cpp DIR [--out DIR]

``--llama-cpp`` is a llama.cpp source tree: a ggml-org/llama.cpp checkout or the
``vendor/llama.cpp`` folder of the llama-cpp-python sdist. ``--out`` defaults to
tests/fixtures/gguf under the repository root.

What it does:

1. Compiles the tree's ``ggml/src/ggml-quants.c`` with a tiny C shim (written to a temp
   folder) into a shared library and loads it with ctypes. The shim defines the four symbols
   ggml-quants.c takes from ggml.c (``ggml_abort``, ``ggml_row_size``, ``ggml_type_size``,
   ``ggml_type_name``), with the sizes taken from the block structs of the tree's own
   ``ggml-common.h``, and a guard that turns a ``GGML_ASSERT`` inside a quantizer into an
   error return instead of killing the process. The build is ggml's generic C path: no
   ``-march``, so x86-64 baseline without FMA, and ``-ffp-contract=off`` so that the
   compiler fuses no multiply-add either.
2. Makes one deterministic float32 source matrix of shape (4, 512): three weight-like rows
   with outliers and one row of edge values.
3. Quantizes it with ``quantize_<type>`` (``quantize_row_<type>_ref`` for the types that
   have only that) for every quantized type of ggml.h's enum that ggml-quants.c can both
   quantize and dequantize, passing an importance matrix only to the quantizers that abort
   without one, and dequantizes the bytes with ``dequantize_row_<type>``.
4. Writes ``ggml_types.gguf`` with gguf-py (F32, F16, BF16 and every quantized type, one
   tensor each, ``blk.0.<type>.weight``), and reads it back to check it.
5. Writes ``ggml_types.expected.npz``: ``source``, ``imatrix`` and, per tensor name, ggml's
   dequantized float32 (4, 512).
6. Writes the folder's README.md: versions, compiler, flags, what was left out and why.

Nothing of ggml's code or tables is copied into this repository: the library is built from
the user's tree in a temp folder and thrown away.
"""

from __future__ import annotations

import argparse
import ctypes
import re
import shutil
import struct
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import gguf
import ml_dtypes
import numpy as np

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "tests" / "fixtures" / "gguf"
GGUF_NAME = "ggml_types.gguf"
NPZ_NAME = "ggml_types.expected.npz"
NEWER_NAME = "ggml_newer_types.gguf"  # the types the installed gguf-py cannot write, by a patched tensor info
GENERAL_NAME = "fmtsim ggml types fixture"

# ggml's reference (generic C) build: no -march, so none of ggml's SIMD paths and no FMA on
# x86-64; -ffp-contract=off so that the compiler does not fuse a*b+c on targets that have FMA
CC_FLAGS = ["-O2", "-fPIC", "-shared", "-ffp-contract=off", "-std=gnu11"]

SEED = 20250101
N_ROWS, N_PER_ROW = 4, 512

# Elements per block of every ggml type this script knows, as the name of the ggml-common.h
# macro that holds the count (the shim needs it to answer ggml_row_size); a quantizable type
# of the enum that is missing here stops the script, so a newer ggml cannot be half covered.
BLOCK_MACRO = {
    "Q1_0": "QK1_0", "Q2_0": "QK2_0",
    "Q4_0": "QK4_0", "Q4_1": "QK4_1", "Q5_0": "QK5_0", "Q5_1": "QK5_1",
    "Q8_0": "QK8_0", "Q8_1": "QK8_1",
    "MXFP4": "QK_MXFP4", "NVFP4": "QK_NVFP4", "IQ4_NL": "QK4_NL",
    "Q2_K": "QK_K", "Q3_K": "QK_K", "Q4_K": "QK_K", "Q5_K": "QK_K", "Q6_K": "QK_K", "Q8_K": "QK_K",
    "IQ2_XXS": "QK_K", "IQ2_XS": "QK_K", "IQ2_S": "QK_K", "IQ3_XXS": "QK_K", "IQ3_S": "QK_K",
    "IQ1_S": "QK_K", "IQ1_M": "QK_K", "IQ4_XS": "QK_K", "TQ1_0": "QK_K", "TQ2_0": "QK_K",
}
# the float types the fixture carries next to the quantized ones (no ggml quantizer involved)
FLOAT_TYPES = ("F32", "F16", "BF16")
# the enum's plain storage types: no quantizer, no dequantizer, nothing to test here
STORAGE_TYPES = ("I8", "I16", "I32", "I64", "F64")

# The lookup grids the i-quant quantizers search must be built first; this is what ggml.c's
# ggml_quantize_init does per type (iq2xs_init_impl(type) / iq3xs_init_impl(grid size)).
IQ2_GRID_TYPES = ("IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ1_S", "IQ1_M")
IQ3_GRID_SIZE = {"IQ3_XXS": 256, "IQ3_S": 512}

SHIM_TEMPLATE = r"""
// Written by fmtsim's tools/gen_gguf_fixtures.py; compiled with ggml-quants.c, then discarded.
// Stands in for the few ggml.c symbols ggml-quants.c links against.
#define GGML_COMMON_DECL_C
#include "ggml-common.h"
#include "ggml-impl.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

// every type the generator knows: (enum suffix, block struct / function stem, elements per block)
#define FIXTURE_TYPES(X) \
@TYPE_LINES@

static jmp_buf * fixture_abort_target = NULL;
static char fixture_abort_text[2048];

// GGML_ASSERT / GGML_ABORT land here: inside a guarded call, jump back to the guard so that
// the generator can report the assertion (or retry with an importance matrix)
void ggml_abort(const char * file, int line, const char * fmt, ...) {
    int n = snprintf(fixture_abort_text, sizeof fixture_abort_text, "%s:%d: ", file, line);
    if (n < 0 || n >= (int) sizeof fixture_abort_text) {
        n = 0;
    }
    va_list args;
    va_start(args, fmt);
    vsnprintf(fixture_abort_text + n, sizeof fixture_abort_text - n, fmt, args);
    va_end(args);
    if (fixture_abort_target) {
        longjmp(*fixture_abort_target, 1);
    }
    fprintf(stderr, "ggml_abort: %s\n", fixture_abort_text);
    abort();
}

const char * fixture_abort_message(void) {
    return fixture_abort_text;
}

int64_t fixture_blck_size(enum ggml_type type) {
    switch (type) {
        case GGML_TYPE_F32: case GGML_TYPE_F16: case GGML_TYPE_BF16: return 1;
#define FIXTURE_BLCK(T, stem, qk) case GGML_TYPE_##T: return qk;
        FIXTURE_TYPES(FIXTURE_BLCK)
        default: return 0;
    }
}

size_t ggml_type_size(enum ggml_type type) {
    switch (type) {
        case GGML_TYPE_F32:  return sizeof(float);
        case GGML_TYPE_F16:  return sizeof(ggml_fp16_t);
        case GGML_TYPE_BF16: return sizeof(ggml_bf16_t);
#define FIXTURE_SIZE(T, stem, qk) case GGML_TYPE_##T: return sizeof(block_##stem);
        FIXTURE_TYPES(FIXTURE_SIZE)
        default: return 0;
    }
}

const char * ggml_type_name(enum ggml_type type) {
    switch (type) {
        case GGML_TYPE_F32: return "f32";
        case GGML_TYPE_F16: return "f16";
        case GGML_TYPE_BF16: return "bf16";
#define FIXTURE_NAME(T, stem, qk) case GGML_TYPE_##T: return #stem;
        FIXTURE_TYPES(FIXTURE_NAME)
        default: return "unknown";
    }
}

size_t ggml_row_size(enum ggml_type type, int64_t ne) {
    const int64_t blck = fixture_blck_size(type);
    if (blck == 0 || ne % blck != 0) {
        ggml_abort(__FILE__, __LINE__, "ggml_row_size: type %d, %lld elements", (int) type, (long long) ne);
    }
    return ggml_type_size(type) * (size_t) (ne / blck);
}

typedef size_t (*fixture_quantize_fn)(const float *, void *, int64_t, int64_t, const float *);
typedef void (*fixture_row_fn)(const void *, void *, int64_t);

// quantize_<type>(src, dst, nrow, n_per_row, imatrix); returns 1 when ggml aborted
int fixture_guarded_quantize(fixture_quantize_fn fn, const float * src, void * dst, int64_t nrow,
                             int64_t n_per_row, const float * imatrix, size_t * written) {
    jmp_buf target;
    fixture_abort_text[0] = '\0';
    if (setjmp(target)) {
        fixture_abort_target = NULL;
        return 1;
    }
    fixture_abort_target = &target;
    *written = fn(src, dst, nrow, n_per_row, imatrix);
    fixture_abort_target = NULL;
    return 0;
}

// quantize_row_<type>_ref(x, y, k) and dequantize_row_<type>(x, y, k); returns 1 when ggml aborted
int fixture_guarded_row(fixture_row_fn fn, const void * src, void * dst, int64_t k) {
    jmp_buf target;
    fixture_abort_text[0] = '\0';
    if (setjmp(target)) {
        fixture_abort_target = NULL;
        return 1;
    }
    fixture_abort_target = &target;
    fn(src, dst, k);
    fixture_abort_target = NULL;
    return 0;
}

// ggml's own scalar float conversions (ggml-impl.h), to hold numpy's and ml_dtypes' to them
void fixture_fp32_to_fp16(const float * x, ggml_fp16_t * y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = GGML_FP32_TO_FP16(x[i]);
}
void fixture_fp16_to_fp32(const ggml_fp16_t * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = GGML_FP16_TO_FP32(x[i]);
}
void fixture_fp32_to_bf16(const float * x, ggml_bf16_t * y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = GGML_FP32_TO_BF16(x[i]);
}
void fixture_bf16_to_fp32(const ggml_bf16_t * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = GGML_BF16_TO_FP32(x[i]);
}
"""


def function_stem(type_name: str) -> str:
    """ggml's spelling of a type in function and struct names: q4_0, iq2_xxs, but q4_K."""
    stem = type_name.lower()
    return stem[:-2] + "_K" if stem.endswith("_k") else stem


def tensor_name(type_name: str) -> str:
    return f"blk.0.{type_name.lower()}.weight"


@dataclass
class QuantizedTensor:
    type_name: str
    ggml_id: int
    raw: bytes
    dequantized: np.ndarray
    quantizer: str  # the ggml function that made the bytes
    imatrix_abort: str | None = None  # ggml's assertion without an imatrix, when it needed one


@dataclass
class Coverage:
    """What the tree's enum and library hold, and what became of each type."""

    enum: dict[str, int]
    quantized: list[str] = field(default_factory=list)
    no_dequantizer: dict[str, str] = field(default_factory=dict)
    not_in_gguf_py: list[str] = field(default_factory=list)
    newer: list[QuantizedTensor] = field(default_factory=list)  # made by ggml, unknown to this gguf-py


# --- the tree -------------------------------------------------------------------------------

def read_type_enum(ggml_h: Path) -> dict[str, int]:
    """GGML_TYPE_<name> = <value> of enum ggml_type, commented-out (removed) entries skipped."""
    text = re.sub(r"//[^\n]*", "", ggml_h.read_text())
    body = re.search(r"enum\s+ggml_type\s*\{(.*?)\}", text, re.S)
    if body is None:
        raise SystemExit(f"gen_gguf_fixtures: enum ggml_type not found in {ggml_h}")
    enum = {m.group(1): int(m.group(2)) for m in re.finditer(r"GGML_TYPE_(\w+)\s*=\s*(\d+)", body.group(1))}
    enum.pop("COUNT", None)
    return enum


def read_requires_imatrix(ggml_c: Path) -> list[str] | None:
    """The types ggml.c's ggml_quantize_requires_imatrix names (None when it cannot be found)."""
    if not ggml_c.is_file():
        return None
    text = re.sub(r"//[^\n]*", "", ggml_c.read_text())
    body = re.search(r"bool\s+ggml_quantize_requires_imatrix\s*\([^)]*\)\s*\{(.*?)\}", text, re.S)
    return re.findall(r"GGML_TYPE_(\w+)", body.group(1)) if body else None


def run_text(cmd: list[str], cwd: Path | None = None) -> str | None:
    try:
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip()


def describe_tree(tree: Path) -> list[str]:
    """Lines naming the ggml / llama.cpp version of the tree, from whatever it carries."""
    lines = []
    cmake = (tree / "ggml" / "CMakeLists.txt").read_text()
    parts = [re.search(rf"set\(GGML_VERSION_{p}\s+(\d+)\)", cmake) for p in ("MAJOR", "MINOR", "PATCH")]
    if all(parts):
        lines.append("ggml version (ggml/CMakeLists.txt): " + ".".join(m.group(1) for m in parts if m))
    commit = run_text(["git", "-C", str(tree), "log", "-1", "--format=%H (%cs) %s"])
    if commit:
        shallow = run_text(["git", "-C", str(tree), "rev-parse", "--is-shallow-repository"]) == "true"
        lines.append(f"llama.cpp commit (git HEAD of the tree{', a shallow clone' if shallow else ''}): {commit}")
    # the vendor/llama.cpp folder of a llama-cpp-python sdist: its PKG-INFO and CHANGELOG say more
    sdist = tree.parent.parent if tree.parent.name == "vendor" else None
    if sdist is not None and (sdist / "PKG-INFO").is_file():
        info = (sdist / "PKG-INFO").read_text()
        name = re.search(r"^Name:\s*(\S+)", info, re.M)
        version = re.search(r"^Version:\s*(\S+)", info, re.M)
        if name and version:
            line = f"vendored by {name.group(1)} {version.group(1)} (sdist)"
            changelog = sdist / "CHANGELOG.md"
            if changelog.is_file():
                section = re.search(rf"^## \[{re.escape(version.group(1))}\](.*?)^## ", changelog.read_text(),
                                    re.S | re.M)
                pin = re.search(r"llama\.cpp@([0-9a-f]+)", section.group(1)) if section else None
                if pin:
                    line += f"; its CHANGELOG: llama.cpp@{pin.group(1)}"
            lines.append(line)
    return lines


def build_library(tree: Path, enum: dict[str, int], workdir: Path) -> tuple[ctypes.CDLL, str]:
    """Compile ggml-quants.c plus the shim; returns the loaded library and the compiler's name."""
    unknown = [t for t in BLOCK_MACRO if t not in enum]
    type_lines = " \\\n".join(f"    X({t}, {function_stem(t)}, {BLOCK_MACRO[t]})" for t in BLOCK_MACRO if t in enum)
    if unknown:
        print(f"note: not in this tree's enum, skipped: {', '.join(unknown)}")
    shim = workdir / "fixture_shim.c"
    shim.write_text(SHIM_TEMPLATE.replace("@TYPE_LINES@", type_lines))
    library = workdir / "libggml_quants_fixture.so"
    # run inside the tree with relative paths, so that __FILE__ in ggml's assertion messages
    # reads ggml/src/ggml-quants.c rather than wherever the tree happens to lie
    cmd = ["cc", *CC_FLAGS, "-Iggml/include", "-Iggml/src", "ggml/src/ggml-quants.c", str(shim),
           "-o", str(library), "-lm"]
    done = subprocess.run(cmd, cwd=tree, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"gen_gguf_fixtures: compiling failed:\n{' '.join(cmd)}\n{done.stderr}")
    if done.stderr.strip():
        print(f"compiler warnings:\n{done.stderr}", file=sys.stderr)
    lib = ctypes.CDLL(str(library))
    lib.fixture_abort_message.restype = ctypes.c_char_p
    lib.fixture_blck_size.argtypes = [ctypes.c_int]
    lib.fixture_blck_size.restype = ctypes.c_int64
    lib.ggml_type_size.argtypes = [ctypes.c_int]
    lib.ggml_type_size.restype = ctypes.c_size_t
    lib.ggml_row_size.argtypes = [ctypes.c_int, ctypes.c_int64]
    lib.ggml_row_size.restype = ctypes.c_size_t
    lib.ggml_validate_row_data.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
    lib.ggml_validate_row_data.restype = ctypes.c_bool
    lib.fixture_guarded_quantize.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                             ctypes.c_int64, ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
    lib.fixture_guarded_row.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    for conversion in ("fixture_fp32_to_fp16", "fixture_fp16_to_fp32", "fixture_fp32_to_bf16", "fixture_bf16_to_fp32"):
        getattr(lib, conversion).argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    lib.iq2xs_init_impl.argtypes = [ctypes.c_int]
    lib.iq2xs_free_impl.argtypes = [ctypes.c_int]
    lib.iq3xs_init_impl.argtypes = [ctypes.c_int]
    lib.iq3xs_free_impl.argtypes = [ctypes.c_int]
    compiler = (run_text(["cc", "--version"]) or "cc (version unknown)").splitlines()[0]
    return lib, compiler


def symbol(lib: ctypes.CDLL, name: str) -> int | None:
    """Address of an exported function of the library, or None when it has none by that name."""
    try:
        return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
    except AttributeError:
        return None


# --- the data -------------------------------------------------------------------------------

def make_source() -> np.ndarray:
    """The (4, 512) float32 matrix every tensor encodes."""
    rng = np.random.default_rng(SEED)
    source = np.empty((N_ROWS, N_PER_ROW), dtype=np.float32)
    # rows 0-2: weight-like values; a few outliers x40 stretch their blocks' scales
    weights = rng.normal(0.0, 0.02, size=(3, N_PER_ROW))
    for row in range(3):
        weights[row, rng.choice(N_PER_ROW, size=4, replace=False)] *= 40.0
    source[:3] = weights
    # row 3: edge values, laid out so that each case fills whole 32- and 64-element blocks and
    # the first 256-element super-block holds nothing but zeros and tiny values
    edge = np.empty(N_PER_ROW, dtype=np.float64)
    edge[0:64] = 0.0
    edge[[5, 37]] = -0.0  # signed zeros inside the zero blocks
    edge[64:256] = rng.normal(0.0, 1e-30, size=192)  # normal float32, far below float16's subnormals
    edge[256:320] = 0.0375  # a run of identical values: max == min in every block
    edge[320:384] = -rng.uniform(0.002, 0.06, size=64)  # negatives only
    edge[384:512] = rng.normal(0.0, 0.05, size=128)
    edge[400] = 3.0  # the matrix's largest magnitude
    source[3] = edge
    return source


def make_imatrix(source: np.ndarray) -> np.ndarray:
    """Importance per column: the mean of x^2 over the rows (what llama-imatrix accumulates)."""
    return np.mean(source.astype(np.float64) ** 2, axis=0).astype(np.float32)


# --- quantizing -----------------------------------------------------------------------------

def pointer(array: np.ndarray) -> int:
    return array.ctypes.data


def ggml_abort_text(lib: ctypes.CDLL) -> str:
    return (lib.fixture_abort_message() or b"").decode(errors="replace")


def quantize(lib: ctypes.CDLL, type_name: str, ggml_id: int, source: np.ndarray, imatrix: np.ndarray,
             fill: int) -> tuple[bytes, str, str | None]:
    """ggml's bytes for the source: (bytes, quantizer used, abort text when an imatrix was needed).

    ``fill`` pre-sets the output buffer, so that two calls with different fills show whether a
    quantizer leaves any byte unwritten."""
    stem = function_stem(type_name)
    nbytes = N_ROWS * lib.ggml_row_size(ggml_id, N_PER_ROW)
    out = np.full(nbytes, fill, dtype=np.uint8)
    bulk = symbol(lib, f"quantize_{stem}")
    if bulk is not None:
        written = ctypes.c_size_t(0)
        imatrix_abort = None
        if lib.fixture_guarded_quantize(bulk, pointer(source), pointer(out), N_ROWS, N_PER_ROW, None,
                                        ctypes.byref(written)):
            # some i-quants cannot run without weights (ggml.c's ggml_quantize_requires_imatrix)
            imatrix_abort = ggml_abort_text(lib)
            out[:] = fill
            if lib.fixture_guarded_quantize(bulk, pointer(source), pointer(out), N_ROWS, N_PER_ROW,
                                            pointer(imatrix), ctypes.byref(written)):
                raise SystemExit(f"gen_gguf_fixtures: quantize_{stem} aborted even with an imatrix: "
                                 f"{ggml_abort_text(lib)} (without one: {imatrix_abort})")
        if written.value != nbytes:
            raise SystemExit(f"gen_gguf_fixtures: quantize_{stem} wrote {written.value} bytes, "
                             f"ggml_row_size says {nbytes}")
        return out.tobytes(), f"quantize_{stem}", imatrix_abort
    # types with only a reference row quantizer (Q8_K): the rows are whole blocks, so one call
    # over the whole matrix is the same as one per row
    row_ref = symbol(lib, f"quantize_row_{stem}_ref")
    if row_ref is None:
        raise SystemExit(f"gen_gguf_fixtures: no quantizer for {type_name}")
    if lib.fixture_guarded_row(row_ref, pointer(source), pointer(out), source.size):
        raise SystemExit(f"gen_gguf_fixtures: quantize_row_{stem}_ref aborted: {ggml_abort_text(lib)}")
    return out.tobytes(), f"quantize_row_{stem}_ref", None


def dequantize(lib: ctypes.CDLL, type_name: str, raw: bytes, fill: float) -> np.ndarray:
    """ggml's float32 for the bytes. Blocks never straddle rows, so the whole buffer decodes in
    one call exactly as it would row by row. ``fill`` pre-sets the output, as in quantize."""
    stem = function_stem(type_name)
    fn = symbol(lib, f"dequantize_row_{stem}")
    if fn is None:
        raise SystemExit(f"gen_gguf_fixtures: no dequantize_row_{stem}")
    data = np.frombuffer(raw, dtype=np.uint8).copy()
    out = np.full(N_ROWS * N_PER_ROW, fill, dtype=np.float32)
    if lib.fixture_guarded_row(fn, pointer(data), pointer(out), out.size):
        raise SystemExit(f"gen_gguf_fixtures: dequantize_row_{stem} aborted: {ggml_abort_text(lib)}")
    return out.reshape(N_ROWS, N_PER_ROW)


def init_grids(lib: ctypes.CDLL, enum: dict[str, int], type_name: str) -> None:
    if type_name in IQ2_GRID_TYPES:
        lib.iq2xs_init_impl(enum[type_name])
    elif type_name in IQ3_GRID_SIZE:
        lib.iq3xs_init_impl(IQ3_GRID_SIZE[type_name])


def free_grids(lib: ctypes.CDLL, enum: dict[str, int], done: list[str]) -> None:
    for type_name in done:
        if type_name in IQ2_GRID_TYPES:
            lib.iq2xs_free_impl(enum[type_name])
        elif type_name in IQ3_GRID_SIZE:
            lib.iq3xs_free_impl(IQ3_GRID_SIZE[type_name])


def quantize_all(lib: ctypes.CDLL, enum: dict[str, int], source: np.ndarray,
                 imatrix: np.ndarray) -> tuple[list[QuantizedTensor], Coverage]:
    coverage = Coverage(enum=enum)
    tensors = []
    for type_name, ggml_id in enum.items():
        if type_name in FLOAT_TYPES or type_name in STORAGE_TYPES:
            continue
        stem = function_stem(type_name)
        has_quantizer = any(symbol(lib, s) is not None for s in (f"quantize_{stem}", f"quantize_row_{stem}_ref"))
        has_dequantizer = symbol(lib, f"dequantize_row_{stem}") is not None
        if not has_quantizer and not has_dequantizer:
            raise SystemExit(f"gen_gguf_fixtures: GGML_TYPE_{type_name} has neither quantizer nor dequantizer; "
                             "add it to FLOAT_TYPES / STORAGE_TYPES if it is not a quantized type")
        if type_name not in BLOCK_MACRO:
            raise SystemExit(f"gen_gguf_fixtures: GGML_TYPE_{type_name} is new to this script: add its block "
                             "size macro to BLOCK_MACRO")
        if not has_dequantizer:
            coverage.no_dequantizer[type_name] = f"quantizer present, no dequantize_row_{stem}"
            continue
        if not has_quantizer:
            coverage.no_dequantizer[type_name] = f"dequantize_row_{stem} present, no quantizer"
            continue
        init_grids(lib, enum, type_name)
        raw, quantizer, imatrix_abort = quantize(lib, type_name, ggml_id, source, imatrix, fill=0x00)
        again, _, _ = quantize(lib, type_name, ggml_id, source, imatrix, fill=0xFF)
        if raw != again:
            raise SystemExit(f"gen_gguf_fixtures: {quantizer} leaves bytes unwritten or is not deterministic")
        if not lib.ggml_validate_row_data(ggml_id, raw, len(raw)):
            raise SystemExit(f"gen_gguf_fixtures: ggml_validate_row_data rejects the {type_name} bytes")
        dequantized = dequantize(lib, type_name, raw, fill=np.nan)
        if not np.array_equal(dequantized.view(np.uint32), dequantize(lib, type_name, raw, fill=-7.0).view(np.uint32)):
            raise SystemExit(f"gen_gguf_fixtures: dequantize_row_{stem} leaves elements unwritten")
        coverage.quantized.append(type_name)
        if type_name not in gguf.GGMLQuantizationType.__members__:
            coverage.not_in_gguf_py.append(type_name)
            coverage.newer.append(QuantizedTensor(type_name, ggml_id, raw, dequantized, quantizer, imatrix_abort))
            continue
        tensors.append(QuantizedTensor(type_name, ggml_id, raw, dequantized, quantizer, imatrix_abort))
    free_grids(lib, enum, coverage.quantized)
    return tensors, coverage


def float_tensors(lib: ctypes.CDLL, enum: dict[str, int], source: np.ndarray) -> list[QuantizedTensor]:
    """F32, F16 (numpy's float16) and BF16 (ml_dtypes' round-to-nearest-even), each held to
    ggml's own scalar conversions in ggml-impl.h, which also give the expected float32."""
    n = source.size
    f16_bits = source.astype(np.float16).view(np.uint16)
    bf16_bits = source.astype(ml_dtypes.bfloat16).view(np.uint16)
    widened_by_ggml = {}
    for label, encoded, to_half, to_float in (("F16", f16_bits, lib.fixture_fp32_to_fp16, lib.fixture_fp16_to_fp32),
                                              ("BF16", bf16_bits, lib.fixture_fp32_to_bf16, lib.fixture_bf16_to_fp32)):
        ggml_bits = np.empty_like(encoded)
        to_half(pointer(source), pointer(ggml_bits), n)
        if not np.array_equal(ggml_bits, encoded):
            raise SystemExit(f"gen_gguf_fixtures: {label}: ggml's fp32 conversion differs from numpy's / "
                             f"ml_dtypes' in {int(np.count_nonzero(ggml_bits != encoded))} elements")
        back = np.empty(source.shape, dtype=np.float32)
        to_float(pointer(encoded), pointer(back), n)
        widened = encoded.view(np.float16 if label == "F16" else ml_dtypes.bfloat16).astype(np.float32)
        if not np.array_equal(back.view(np.uint32), widened.view(np.uint32)):
            raise SystemExit(f"gen_gguf_fixtures: {label}: ggml's widening to float32 differs from numpy's")
        widened_by_ggml[label] = back
    return [
        QuantizedTensor("F32", enum["F32"], source.tobytes(), source.copy(), "float32 as is"),
        QuantizedTensor("F16", enum["F16"], f16_bits.tobytes(), widened_by_ggml["F16"], "numpy astype(float16)"),
        QuantizedTensor("BF16", enum["BF16"], bf16_bits.tobytes(), widened_by_ggml["BF16"],
                        "ml_dtypes astype(bfloat16)"),
    ]


# --- writing and checking -------------------------------------------------------------------

def check_sizes(lib: ctypes.CDLL, tensors: list[QuantizedTensor]) -> None:
    """The shim's block sizes (from ggml-common.h's structs) must be gguf-py's."""
    for t in tensors:
        qtype = gguf.GGMLQuantizationType[t.type_name]
        ours = (lib.fixture_blck_size(t.ggml_id), lib.ggml_type_size(t.ggml_id))
        if qtype.value != t.ggml_id or gguf.GGML_QUANT_SIZES[qtype] != ours:
            raise SystemExit(f"gen_gguf_fixtures: {t.type_name}: ggml id {t.ggml_id}, block {ours}; gguf-py: id "
                             f"{qtype.value}, block {gguf.GGML_QUANT_SIZES[qtype]}")


def write_gguf(path: Path, tensors: list[QuantizedTensor]) -> None:
    writer = gguf.GGUFWriter(path, arch="llama")
    writer.add_name(GENERAL_NAME)
    for t in tensors:
        qtype = gguf.GGMLQuantizationType[t.type_name]
        raw = np.frombuffer(t.raw, dtype=np.uint8).reshape(N_ROWS, -1)
        # a uint8 array with raw_dtype: gguf-py turns the byte shape back into the logical
        # (4, 512) and records ne = [512, 4]
        writer.add_tensor(tensor_name(t.type_name), raw, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def write_newer_gguf(path: Path, tensors: list[QuantizedTensor], block_sizes: dict[str, tuple[int, int]]) -> None:
    """Types gguf-py cannot write yet (Q2_0 for gguf 0.19.0): each tensor written under a stand-in type
    of the same block byte size (its bytes unchanged), then its tensor info patched to the real type
    code and row length. fmtsim reads the file with its own parser (and says gguf-py could not)."""
    sizes = {q: gguf.GGML_QUANT_SIZES[q] for q in gguf.GGMLQuantizationType if q in gguf.GGML_QUANT_SIZES}
    writer = gguf.GGUFWriter(path, arch="llama")
    writer.add_name(GENERAL_NAME + " (types newer than gguf-py)")
    patches = []
    for t in tensors:
        block, type_size = block_sizes[t.type_name]
        stand_in = next(q for q, (b, ts) in sizes.items() if ts == type_size and b > 1)
        raw = np.frombuffer(t.raw, dtype=np.uint8).reshape(N_ROWS, -1)
        writer.add_tensor(tensor_name(t.type_name), raw, raw_dtype=stand_in)
        patches.append((tensor_name(t.type_name), raw.shape[1] // type_size * block, t.ggml_id))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    data = bytearray(path.read_bytes())
    for name, ne0, ggml_id in patches:
        key = struct.pack("<Q", len(name)) + name.encode()
        at = data.index(key) + len(key)
        n_dims = struct.unpack_from("<I", data, at)[0]
        struct.pack_into("<Q", data, at + 4, ne0)
        struct.pack_into("<I", data, at + 4 + 8 * n_dims, ggml_id)
    path.write_bytes(bytes(data))


def check_gguf(path: Path, tensors: list[QuantizedTensor]) -> None:
    reader = gguf.GGUFReader(path)
    name_field = reader.get_field(gguf.Keys.General.NAME)
    if name_field is None or name_field.contents() != GENERAL_NAME:
        raise SystemExit(f"gen_gguf_fixtures: {path}: general.name did not read back")
    found = {t.name: t for t in reader.tensors}
    if list(found) != [tensor_name(t.type_name) for t in tensors]:
        raise SystemExit(f"gen_gguf_fixtures: {path}: tensors read back as {list(found)}")
    for t in tensors:
        got = found[tensor_name(t.type_name)]
        problems = []
        if got.tensor_type != gguf.GGMLQuantizationType[t.type_name]:
            problems.append(f"type {got.tensor_type!r}")
        if [int(d) for d in got.shape] != [N_PER_ROW, N_ROWS]:
            problems.append(f"ne {list(got.shape)}")
        if int(got.n_bytes) != len(t.raw):
            problems.append(f"{got.n_bytes} bytes, wrote {len(t.raw)}")
        if np.asarray(got.data).tobytes() != t.raw:
            problems.append("data differ")
        if problems:
            raise SystemExit(f"gen_gguf_fixtures: {path}: {got.name}: " + ", ".join(problems))


def write_npz(path: Path, source: np.ndarray, imatrix: np.ndarray | None, tensors: list[QuantizedTensor]) -> None:
    arrays = {"source": source}
    if imatrix is not None:
        arrays["imatrix"] = imatrix
    arrays.update({tensor_name(t.type_name): t.dequantized for t in tensors})
    np.savez_compressed(path, **arrays)  # type: ignore[arg-type]


def max_abs_error(t: QuantizedTensor, source: np.ndarray) -> float:
    return float(np.max(np.abs(t.dequantized.astype(np.float64) - source.astype(np.float64))))


def summary_rows(tensors: list[QuantizedTensor], source: np.ndarray) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for t in tensors:
        bits = 8 * len(t.raw) / source.size
        nonfinite = int(np.count_nonzero(~np.isfinite(t.dequantized)))
        rows.append((t.type_name, str(len(t.raw)), f"{bits:.4g}", "yes" if t.imatrix_abort else "",
                     f"{max_abs_error(t, source):.6g}", str(nonfinite) if nonfinite else ""))
    return rows


SUMMARY_HEADER = ("type", "bytes", "bits/weight", "imatrix", "max abs error", "non-finite")


def markdown_table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|",
            *("| " + " | ".join(r) + " |" for r in rows)]


def text_table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(x) for x in col) for col in zip(header, *rows, strict=True)]
    return "\n".join("  ".join(x.ljust(w) for x, w in zip(r, widths, strict=True)).rstrip()
                     for r in [header, tuple("-" * w for w in widths), *rows])


def write_readme(path: Path, out_arg: str | None, tree_lines: list[str], compiler: str,
                 tensors: list[QuantizedTensor], coverage: Coverage, ggml_requires_imatrix: list[str] | None,
                 source: np.ndarray, gguf_bytes: int, npz_bytes: int) -> None:
    needed = [t for t in tensors if t.imatrix_abort]
    command = "python tools/gen_gguf_fixtures.py --llama-cpp DIR" + (f" --out {out_arg}" if out_arg else "")
    if ggml_requires_imatrix is None:
        cross_check = "ggml.c's `ggml_quantize_requires_imatrix` was not found in the tree."
    elif sorted(ggml_requires_imatrix) == sorted(t.type_name for t in needed):
        cross_check = "ggml.c's `ggml_quantize_requires_imatrix` names the same types."
    else:
        cross_check = f"ggml.c's `ggml_quantize_requires_imatrix` names {', '.join(ggml_requires_imatrix)} instead."
    left_out = []
    for type_name, why in coverage.no_dequantizer.items():
        extra = (" (ggml-quants.h has its declaration commented out: Q8_1 is the activation-side "
                 "format of the CPU dot products, not a storage format)" if type_name == "Q8_1" else "")
        left_out.append(f"- {type_name}: {why}{extra}.")
    newer = []
    for type_name in coverage.not_in_gguf_py:
        newer.append(f"- {type_name}: gguf-py {gguf_version()} has no `GGMLQuantizationType.{type_name}`, so it is "
                     f"in `{NEWER_NAME}` instead: written by gguf-py under a stand-in type with the same block "
                     "byte size, then its tensor info patched to the real type code and row length (gguf-py "
                     "cannot read that file; fmtsim's own parser does). Its expected values are in the .npz.")
    left_out.append(f"- {', '.join(STORAGE_TYPES)}: plain storage types, no quantizer.")
    left_out += newer
    made_by = {"F32": "the source as is", "F16": "numpy `astype(float16)`", "BF16": "ml_dtypes `astype(bfloat16)`"}
    table = markdown_table(("type", "made by", *SUMMARY_HEADER[1:5]),
                           [(r[0], made_by.get(t.type_name, f"`{t.quantizer}`"), *r[1:5])
                            for r, t in zip(summary_rows(tensors, source), tensors, strict=True)])
    lines = [
        "# GGUF fixtures made by ggml's own C quantizers",
        "",
        "Generated by `tools/gen_gguf_fixtures.py`; do not edit by hand.",
        "",
        f"- `{GGUF_NAME}` ({gguf_bytes:,} bytes): a GGUF v3 file written by gguf-py (architecture `llama`, "
        f"`general.name` = \"{GENERAL_NAME}\") with one tensor per ggml type, named "
        "`blk.0.<type, lower case>.weight`, each of logical shape (4, 512) (ne = [512, 4]). The quantized "
        "tensors hold the bytes of ggml's C quantizers; F16 is numpy's `astype(float16)` of the source, BF16 "
        "ml_dtypes' round-to-nearest-even `astype(bfloat16)`.",
        f"- `{NPZ_NAME}` ({npz_bytes:,} bytes): `source`, the float32 (4, 512) matrix every tensor encodes; "
        "`imatrix`, the importance matrix given to the quantizers that require one (per column, the mean "
        "of x^2 over the rows); and per tensor name, the float32 (4, 512) that ggml's C "
        "`dequantize_row_<type>` returns for that tensor's bytes (F32: the source; F16 / BF16: ggml's "
        "`GGML_FP16_TO_FP32` / `GGML_BF16_TO_FP32`). Its bytes change from run to run (zip timestamps); "
        "its arrays do not. The GGUF file is the same byte for byte on every run.",
        "",
        "The source: rows 0-2 are normal(0, 0.02) with four outliers x40 per row; row 3 holds edge values "
        "in whole blocks: exact zeros (two of them -0.0) at 0-63, tiny normals ~1e-30 at 64-255 (so the "
        "first 256-element super-block is zeros and tiny values only), a run of 0.0375 at 256-319, "
        "negatives only at 320-383, normal(0, 0.05) with the maximum 3.0 at 384-511. numpy "
        f"`default_rng({SEED})`.",
        "",
        "## Regenerate",
        "",
        "```",
        command,
        "```",
        "",
        "DIR is a llama.cpp source tree; these files came from the `vendor/llama.cpp` folder of the "
        "llama-cpp-python 0.3.36 sdist (`llama_cpp_python-0.3.36.tar.gz` from PyPI, unpacked). The script "
        "compiles that tree's `ggml/src/ggml-quants.c` with a small shim in a temp folder and calls it "
        "through ctypes; nothing of ggml is copied here. It takes about half a minute, most of it ggml "
        "building the i-quants' search grids.",
        "",
        "## Provenance",
        "",
        *(f"- {line}" for line in tree_lines),
        f"- compiler: `{compiler}`",
        f"- build: `cc {' '.join(CC_FLAGS)} -Iggml/include -Iggml/src ggml/src/ggml-quants.c shim.c -lm` "
        "(ggml's generic C path: no `-march`, so no SIMD paths and no FMA on x86-64; `-ffp-contract=off`, "
        "so no fused multiply-add either)",
        f"- gguf-py (`gguf` package) {gguf_version()}, numpy {np.__version__}, ml_dtypes {ml_dtypes.__version__}",
        "",
        "## Types",
        "",
        "Given the importance matrix: " + (", ".join(t.type_name for t in needed) or "none") + ". Their "
        "quantizers abort without one (`GGML_ASSERT(quant_weights && \"missing quantization weights\")`), "
        "so the script retried them with `imatrix`; every other quantizer got NULL. " + cross_check,
        "",
        "Left out:",
        "",
        *left_out,
        "",
        "What the script checks before writing: each quantizer wrote every byte and exactly "
        "`nrow * ggml_row_size` of them (two runs over buffers pre-filled 0x00 and 0xFF agree); "
        "`ggml_validate_row_data` accepts the bytes; the dequantizer wrote every element; the block sizes "
        "of ggml-common.h are gguf-py's `GGML_QUANT_SIZES`; numpy's float16 and ml_dtypes' bfloat16 "
        "encodings are ggml's `GGML_FP32_TO_FP16` / `GGML_FP32_TO_BF16` bit for bit; and gguf-py's "
        "`GGUFReader` reads back every tensor's type, shape and bytes.",
        "",
        "Per tensor (max abs error: |dequantized - source| over all 2048 elements; no output is NaN or Inf):"
        if all(np.isfinite(t.dequantized).all() for t in tensors) else
        "Per tensor (max abs error: |dequantized - source| over all 2048 elements):",
        "",
        *table,
        "",
    ]
    path.write_text("\n".join(lines))


def gguf_version() -> str:
    from importlib.metadata import version

    return version("gguf")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llama-cpp", required=True, type=Path, help="a llama.cpp source tree")
    ap.add_argument("--out", type=Path, default=None, help=f"output folder (default {DEFAULT_OUT.relative_to(REPO)})")
    args = ap.parse_args(argv)
    tree = args.llama_cpp.resolve()
    quants_c = tree / "ggml" / "src" / "ggml-quants.c"
    if not quants_c.is_file():
        raise SystemExit(f"gen_gguf_fixtures: {quants_c} not found (give the llama.cpp tree's root)")
    if shutil.which("cc") is None:
        raise SystemExit("gen_gguf_fixtures: no C compiler (cc) on PATH")
    out = args.out if args.out is not None else DEFAULT_OUT
    out.mkdir(parents=True, exist_ok=True)

    enum = read_type_enum(tree / "ggml" / "include" / "ggml.h")
    source = make_source()
    imatrix = make_imatrix(source)
    with tempfile.TemporaryDirectory(prefix="gen_gguf_fixtures.") as tmp:
        lib, compiler = build_library(tree, enum, Path(tmp))
        quantized, coverage = quantize_all(lib, enum, source, imatrix)
        tensors = sorted(float_tensors(lib, enum, source) + quantized, key=lambda t: t.ggml_id)
        check_sizes(lib, [t for t in tensors if t.type_name in BLOCK_MACRO])
        newer_sizes = {t.type_name: (lib.fixture_blck_size(t.ggml_id), lib.ggml_type_size(t.ggml_id))
                       for t in coverage.newer}
    used_imatrix = imatrix if any(t.imatrix_abort for t in tensors) else None

    gguf_path, npz_path = out / GGUF_NAME, out / NPZ_NAME
    write_gguf(gguf_path, tensors)
    check_gguf(gguf_path, tensors)
    newer_path = out / NEWER_NAME
    if coverage.newer:
        write_newer_gguf(newer_path, coverage.newer, newer_sizes)
    else:
        newer_path.unlink(missing_ok=True)
    write_npz(npz_path, source, used_imatrix, tensors + coverage.newer)
    write_readme(out / "README.md", str(args.out) if args.out is not None else None, describe_tree(tree), compiler,
                 tensors, coverage, read_requires_imatrix(tree / "ggml" / "src" / "ggml.c"), source,
                 gguf_path.stat().st_size, npz_path.stat().st_size)

    print(text_table(SUMMARY_HEADER, summary_rows(tensors, source)))
    print()
    for t in tensors:
        if t.imatrix_abort:
            print(f"{t.type_name}: imatrix given; without one ggml aborted: {t.imatrix_abort}")
    for type_name, why in coverage.no_dequantizer.items():
        print(f"left out {type_name}: {why}")
    for type_name in coverage.not_in_gguf_py:
        print(f"{type_name}: gguf-py {gguf_version()} has no GGMLQuantizationType.{type_name}: written to {NEWER_NAME}")
    for path in (gguf_path, npz_path, out / "README.md"):
        print(f"wrote {path} ({path.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
