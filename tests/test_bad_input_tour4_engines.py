"""The fourth bad-input tour's tracebacks in the compiled engines and around them: a damaged,
truncated, foreign or swapped library in the build cache (dlopen of a truncated file killed
the process with SIGBUS), a compiler that builds a library without the entry points, a
``CXX`` holding flags or a wrapper, matrix sizes that cannot be allocated, optional
implementations that fail to import, and arguments that reached numpy, dask or pathlib
unchecked."""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import math
import os
import shlex
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from fmtsim import mx, nvfp4
from fmtsim.cli import main
from fmtsim.conformance import shim_build
from fmtsim.executor import check_scheduler, get_executor
from fmtsim.mma import compiled, gemm, matmul, slow_matmul
from fmtsim.mma.dfiles import read_array

from .conftest import slow_unless  # noqa: E402

REAL_CXX = shim_build.find_compiler()
needs_cxx = pytest.mark.skipif(REAL_CXX is None, reason="no C++ compiler here: the builds under test cannot run")

LIBRARIES = {"mx_blocks": mx._LIBRARY, "nv_chain": compiled._LIBRARY}


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """A cache of its own, and both libraries built (or failed) afresh before and after."""
    monkeypatch.setenv("FMTSIM_CACHE", str(tmp_path / "cache"))
    for lib in LIBRARIES.values():
        lib.forget()
    yield tmp_path
    for lib in LIBRARIES.values():
        lib.forget()


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Both libraries as the real compiler builds them (with the portable flags: what they are
    built with does not matter to a cache test, only that they are the real thing)."""
    if REAL_CXX is None:
        pytest.skip("no C++ compiler here")
    out = tmp_path_factory.mktemp("built")
    root = Path(mx.__file__).parent
    # codec_kernels too: the block quantizers encode through it (its own cache tests: test_codec_compiled)
    for name, src in (("mx_blocks", root / "mx_blocks.cpp"), ("nv_chain", root / "mma" / "nv_chain.cpp"),
                      ("codec_kernels", root / "codec_kernels.cpp")):
        subprocess.run([*shlex.split(REAL_CXX), "-O2", "-shared", "-fPIC", "-std=c++17", "-ffp-contract=off",
                        str(src), "-o", str(out / f"{name}.so")], check=True)
    empty = out / "empty.cpp"
    empty.write_text("int fmtsim_nothing_here;\n")
    subprocess.run([*shlex.split(REAL_CXX), "-shared", "-fPIC", str(empty), "-o", str(out / "empty.so")], check=True)
    return out


def copying_compiler(tmp_path: Path, built: Path) -> Path:
    """A "compiler" that writes the real library for the source it is given (in a blink), and
    fails while the file ``broken`` lies beside it: the cache tests then cost no compile."""
    cxx = tmp_path / "copy-c++"
    cxx.write_text("#!/bin/sh\n"
                   f"[ -e '{tmp_path}/broken' ] && {{ echo 'error: broken on purpose' >&2; exit 1; }}\n"
                   "out=; src=\n"
                   'while [ $# -gt 0 ]; do case "$1" in -o) out=$2; shift;; *.cpp) src=$1;; esac; shift; done\n'
                   f'cp "{built}/$(basename "$src" .cpp).so" "$out"\n')
    cxx.chmod(0o755)
    return cxx


# what a fresh process does with the cache: the default engine and engine="compiled" on one
# input each, their bits against the numpy engine's, and every warning
_CHILD = r"""
import json, sys, warnings
import numpy as np
from fmtsim import mx
from fmtsim.mma import matmul
warnings.simplefilter("always")
which = sys.argv[1]
out = {}
with warnings.catch_warnings(record=True) as seen:
    if which == "mx_blocks":
        x = np.linspace(-7, 9, 128, dtype=np.float32).reshape(4, 32)
        ref = mx.quantize(x, "mxfp8_e4m3", engine="numpy")
        auto = mx.quantize(x, "mxfp8_e4m3")
        out["auto"] = bool(np.array_equal(auto.codes, ref.codes) and np.array_equal(auto.scales, ref.scales))
        try:
            got = mx.quantize(x, "mxfp8_e4m3", engine="compiled")
            out["compiled"] = bool(np.array_equal(got.codes, ref.codes))
        except ValueError as e:
            out["compiled"] = str(e)
    else:
        a = (np.arange(64, dtype=np.uint8) % 0x70).reshape(2, 32)
        kw = dict(unit="sm90_wgmma_fp8", a_format="e4m3", b_format="e4m3")
        ref = matmul(a, a.T.copy(), None, engine="numpy", **kw).view(np.uint32)
        out["auto"] = bool(np.array_equal(matmul(a, a.T.copy(), None, **kw).view(np.uint32), ref))
        try:
            got = matmul(a, a.T.copy(), None, engine="compiled", **kw).view(np.uint32)
            out["compiled"] = bool(np.array_equal(got, ref))
        except ValueError as e:
            out["compiled"] = str(e)
out["warnings"] = [str(w.message) for w in seen if issubclass(w.category, RuntimeWarning)]
print(json.dumps(out))
"""


def child(which: str, env_extra: dict[str, str]) -> dict:
    env = {**os.environ, **env_extra}
    r = subprocess.run([sys.executable, "-c", _CHILD, which], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, f"the process ended with status {r.returncode} (SIGBUS is -7): {r.stderr[-2000:]}"
    return json.loads(r.stdout.strip().splitlines()[-1])


def _libc() -> Path:
    with open("/proc/self/maps") as fh:
        for line in fh:
            path = line.split()[-1]
            if "/libc.so" in path or "/libc-" in path:
                return Path(path)
    pytest.skip("no libc mapped in this process (not a glibc Linux)")


def _replace(lib: Path, data: bytes) -> None:
    """``lib`` now holding ``data`` as a new file: writing into the old one in place would change the
    pages of a copy this process may still have mapped (a crash at exit, not the damage under test)."""
    lib.unlink()
    lib.write_bytes(data)


def _damage(kind: str, lib: Path, built: Path, other: Path) -> None:
    """Make the cache entry ``lib`` (``other``: the other library's entry) ``kind``."""
    side = lib.with_name(lib.name + ".sha256")
    data = lib.read_bytes()
    if kind == "truncated":  # its program headers promise pages past the end of the file
        _replace(lib, data[:3000])
    elif kind == "zero_bytes":
        _replace(lib, b"")
    elif kind == "foreign_libc":
        _replace(lib, _libc().read_bytes())
    elif kind == "empty_library":
        _replace(lib, (built / "empty.so").read_bytes())
    elif kind == "swapped":  # the other library with its own sidecar, under this one's name
        _replace(lib, other.read_bytes())
        side.write_bytes(other.with_name(other.name + ".sha256").read_bytes())
    elif kind == "swapped_restamped":  # ... with a sidecar that matches it: only the entry points tell
        _replace(lib, other.read_bytes())
        payload = lib.read_bytes()
        side.write_text(f"{lib.name} {len(payload)} {hashlib.sha256(payload).hexdigest()}\n")
    elif kind == "no_sidecar":  # as an older fmtsim left it: not known to be whole
        side.unlink()
    elif kind == "garbage_sidecar":
        side.write_text("not a record")
    else:  # pragma: no cover
        raise AssertionError(kind)


DAMAGE = ["truncated", "zero_bytes", "foreign_libc", "empty_library", "swapped", "swapped_restamped", "no_sidecar",
          "garbage_sidecar"]


def _entries(cache: Path, name: str) -> list[Path]:
    return sorted(cache.glob(f"{name}-*.so"))


@needs_cxx
@pytest.mark.parametrize("which", ["mx_blocks", "nv_chain"])
# the README's quick run keeps the SIGBUS case (a truncated library) and the swapped one; --full all
@pytest.mark.parametrize("kind", slow_unless(list(DAMAGE), keep={"truncated", "swapped"}))
def test_a_damaged_cache_entry_is_rebuilt(which, kind, fresh, built):
    """Every damaged cache entry (before: a truncated one killed the process with SIGBUS, a
    swapped or empty one raised AttributeError out of mx.quantize / matmul) is built again:
    a fresh process gives the compiled engine's bits, without a warning, and the entry is
    the real library again, its sidecar matching."""
    cache = fresh / "cache"
    env = {"FMTSIM_CACHE": str(cache), "CXX": str(copying_compiler(fresh, built))}
    for name in LIBRARIES:  # both entries, so that one can be swapped for the other
        assert child(name, env) == {"auto": True, "compiled": True, "warnings": []}
    (lib,), (other,) = _entries(cache, which), _entries(cache, "nv_chain" if which == "mx_blocks" else "mx_blocks")
    _damage(kind, lib, built, other)
    assert child(which, env) == {"auto": True, "compiled": True, "warnings": []}
    assert _entries(cache, which) == [lib]
    assert lib.read_bytes() == (built / f"{which}.so").read_bytes()
    assert shim_build.damage(lib) is None


@needs_cxx
@pytest.mark.parametrize("kind", ["truncated", "foreign_libc", "swapped_restamped"])
def test_a_damaged_entry_that_cannot_be_rebuilt_is_named(kind, fresh, built):
    """Where the rebuild fails too, 'compiled' refuses naming the damaged file and why, and
    the default engine runs numpy with a warning saying the same (before: SIGBUS, or an
    AttributeError)."""
    cache = fresh / "cache"
    env = {"FMTSIM_CACHE": str(cache), "CXX": str(copying_compiler(fresh, built))}
    for name in LIBRARIES:
        child(name, env)
    (lib,), (other,) = _entries(cache, "mx_blocks"), _entries(cache, "nv_chain")
    _damage(kind, lib, built, other)
    (fresh / "broken").write_text("")
    got = child("mx_blocks", env)
    why = {"truncated": "it holds 3000 bytes, ", "foreign_libc": "it holds ",
           "swapped_restamped": "it lacks fmtsim_mx_f32, fmtsim_nvfp4_f32"}[kind]
    assert got["auto"] is True
    assert "engine='compiled' is unavailable" in got["compiled"], got
    for text in (got["compiled"], got["warnings"][0]):
        assert "broken on purpose" in text and f"the cached {lib} is damaged ({why}" in text, text
    assert len(got["warnings"]) == 1 and "engine='auto' runs the numpy path" in got["warnings"][0]


def _script(tmp_path: Path, name: str, body: str) -> Path:
    p = tmp_path / name
    p.write_text("#!/bin/sh\n" + body)
    p.chmod(0o755)
    return p


def _run_both(monkeypatch, which: str) -> tuple[str | bool, list[str]]:
    """engine='compiled' (its bits against numpy's, or its refusal) and the default engine's
    warnings, in this process."""
    LIBRARIES[which].forget()
    x = np.linspace(-7, 9, 128, dtype=np.float32).reshape(4, 32)
    a = (np.arange(64, dtype=np.uint8) % 0x70).reshape(2, 32)
    kw = dict(unit="sm90_wgmma_fp8", a_format="e4m3", b_format="e4m3")

    def call(engine):
        if which == "mx_blocks":
            return mx.quantize(x, "mxfp4", engine=engine).codes
        return matmul(a, a.T.copy(), None, engine=engine, **kw).view(np.uint32)

    ref = call("numpy")
    try:
        compiled_result: str | bool = bool(np.array_equal(call("compiled"), ref))
    except ValueError as e:
        compiled_result = str(e)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert np.array_equal(call("auto"), ref)
    return compiled_result, [str(w.message) for w in seen if issubclass(w.category, RuntimeWarning)]


@needs_cxx
@pytest.mark.parametrize("which, case", [("mx_blocks", "hides_symbols")] + [
    (which, case) for which in LIBRARIES for case in ("empty_library", "writes_nothing", "writes_empty_file")])
def test_a_compiler_that_builds_no_usable_library(which, case, fresh, built, monkeypatch):
    """A compiler that exits 0 with a library lacking the entry points (hidden symbols, an empty
    library) or with no library at all is a failed build: 'compiled' refuses with the true
    cause, the default engine runs numpy (same bits) with a warning giving it, and nothing is
    left in the cache to be loaded later. Before: AttributeError: undefined symbol
    fmtsim_mx_f32; 'cannot write to the cache directory' for a compiler that writes nothing."""
    real = REAL_CXX
    if case == "hides_symbols":  # a real compile (of the quick one: the compiler's doing, not the source's)
        cxx = _script(fresh, "c++", f'exec {real} "$@" -fvisibility=hidden\n')
        why = "lacks the entry points fmtsim_"
    elif case == "empty_library":
        cxx = _script(fresh, "c++", f"""out=
while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done
cp '{built}/empty.so' "$out"
""")
        why = "lacks the entry points fmtsim_"
    elif case == "writes_nothing":
        cxx = _script(fresh, "c++", "exit 0\n")
        why = "produced no library (exit status 0, no output file): is CXX a C++ compiler?"
    else:
        cxx = _script(fresh, "c++", 'while [ $# -gt 0 ]; do [ "$1" = -o ] && : > "$2"; shift; done\n')
        why = "produced no library (exit status 0, an empty file)"
    monkeypatch.setenv("CXX", str(cxx))
    got, warned = _run_both(monkeypatch, which)
    assert isinstance(got, str) and "engine='compiled' is unavailable" in got and why in got, got
    assert "cannot write to the cache directory" not in got
    assert len(warned) == 1 and why in warned[0] and "runs the numpy path" in warned[0], warned
    assert not list((fresh / "cache").glob("*.so")), list((fresh / "cache").iterdir())


@needs_cxx
@pytest.mark.parametrize("cxx", ["{real} -O1", "env {real}", "'{tmp}/my compiler' -g0", "  {real}  "])
def test_cxx_holding_flags_or_a_wrapper(cxx, fresh, monkeypatch):
    """CXX is split as a shell splits it (as make does): flags after the compiler, a wrapper
    before it (as ``ccache g++``), a quoted path with a space. Before: 'no C++ compiler found'."""
    wrapper = fresh / "my compiler"
    wrapper.write_text(f'#!/bin/sh\nexec {REAL_CXX} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("CXX", cxx.format(real=REAL_CXX, tmp=fresh))
    got, warned = _run_both(monkeypatch, "mx_blocks")
    assert got is True and warned == []
    assert len(list((fresh / "cache").glob("mx_blocks-*.so"))) == 1


@pytest.mark.parametrize("cxx, why", [
    ("/nonexistent/c++", "CXX='/nonexistent/c++' is not a program on PATH or a file"),
    ("no-such-wrapper g++", "CXX='no-such-wrapper g++' names 'no-such-wrapper', which is not a program"),
    ("'g++", "CXX=\"'g++\" cannot be split into words"),
])
def test_cxx_that_names_no_compiler(cxx, why, fresh, monkeypatch):
    """A CXX that names nothing runnable is named in the refusal, and (having been asked for)
    in the default engine's warning; no compiler at all (no CXX, none on PATH) stays quiet."""
    monkeypatch.setenv("CXX", cxx)
    got, warned = _run_both(monkeypatch, "mx_blocks")
    assert isinstance(got, str) and "no C++ compiler found: " + why in got, got
    assert len(warned) == 1 and why in warned[0]


def test_no_compiler_at_all_falls_back_quietly(fresh, monkeypatch, tmp_path):
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    got, warned = _run_both(monkeypatch, "mx_blocks")
    assert isinstance(got, str) and "no C++ compiler found (set CXX, or install g++)" in got
    assert warned == []


@needs_cxx
def test_nvfp4_shares_the_checked_library(fresh, built, monkeypatch):
    """nvfp4.quantize runs the same library: a swapped entry is rebuilt for it too."""
    monkeypatch.setenv("CXX", str(copying_compiler(fresh, built)))
    x = np.linspace(-5, 5, 64, dtype=np.float32).reshape(4, 16)
    ref = nvfp4.quantize(x, engine="numpy")
    mx._LIBRARY.forget()
    assert np.array_equal(nvfp4.quantize(x, engine="compiled").codes, ref.codes)
    (lib,) = _entries(fresh / "cache", "mx_blocks")
    _replace(lib, (built / "empty.so").read_bytes())
    mx._LIBRARY.forget()
    assert np.array_equal(nvfp4.quantize(x, engine="compiled").codes, ref.codes)
    assert shim_build.damage(lib) is None


# --- sizes no memory holds -------------------------------------------------------------------

MEMORY = gemm.memory_bytes()
needs_memory_size = pytest.mark.skipif(MEMORY is None, reason="this system does not report its memory size")
_MM = ["mma", "matmul", "--unit", "sm90_wgmma_fp8", "--a-format", "e4m3", "--b-format", "e4m3"]


def _cli(argv, capsys) -> tuple[int, str]:
    rc = main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return rc, err.strip()


@needs_memory_size
@pytest.mark.parametrize("shape, what, dims", [
    ("100000000,100000000,0", "D", "100000000 x 100000000 float32"),  # before: MemoryError traceback
    ("4294967296,1,4294967296", "A", "4294967296 x 4294967296 uint8"),  # before: the int64 product wrapped to 0
    ("1,4294967296,4294967296", "B", "4294967296 x 4294967296 uint8"),
    ("3000000,3000000,1", "D", "3000000 x 3000000 float32"),
    ("1,1,99999999999999999999", "A", "1 x 99999999999999999999 uint8"),
])
def test_a_shape_no_memory_holds_is_refused_naming_shape(shape, what, dims, tmp_path, capsys):
    need = np.dtype(dims.split()[-1]).itemsize * math.prod(int(d) for d in dims.split()[:-1] if d != "x")
    if need <= MEMORY:  # pragma: no cover - a machine this large holds it
        pytest.skip(f"this machine holds {need} bytes")
    empty = tmp_path / "empty.bin"
    empty.write_bytes(b"")
    rc, err = _cli([*_MM, str(empty), str(empty), "--shape", shape, "-o", str(tmp_path / "d.npy")], capsys)
    assert rc == 2 and err.startswith(f"fmtsim: error: --shape {shape}: {what} would be {dims} ("), err
    assert "more than this machine's memory" in err
    assert not (tmp_path / "d.npy").exists()


def test_the_raw_size_check_uses_python_ints(tmp_path):
    """2^32 x 2^32 bytes wrapped to 0 in an int64 product, so an empty file passed the check."""
    empty = tmp_path / "empty.bin"
    empty.write_bytes(b"")
    with pytest.raises(ValueError, match=r"A holds 0 bytes; \(4294967296, 4294967296\) of 1-byte values is "
                       "18446744073709551616$"):
        read_array(empty, "A", (2**32, 2**32), np.uint8)
    with pytest.raises(ValueError, match=r"holds 0 bytes; \(65536, 65536, 65536\) of 4-byte values is "
                       + str(4 * 2**48)):
        read_array(empty, "C", (2**16, 2**16, 2**16), np.float32)


@needs_memory_size
def test_npy_operands_no_memory_holds(tmp_path, capsys):
    """.npy operands with K = 0 make a D of 10^16 values (the API refuses it naming D); a .npy
    header declaring 10^16 bytes is not a readable file (before: MemoryError tracebacks)."""
    a, b = tmp_path / "a.npy", tmp_path / "b.npy"
    np.save(a, np.zeros((10**8, 0), np.uint8))
    np.save(b, np.zeros((0, 10**8), np.uint8))
    rc, err = _cli([*_MM, str(a), str(b), "-o", str(tmp_path / "d.npy")], capsys)
    assert rc == 2 and err.startswith("fmtsim: error: matmul: D would be 100000000 x 100000000 float32 (35.5 PiB)")
    with pytest.raises(ValueError, match="matmul: D would be 100000000 x 100000000 float32"):
        matmul(np.zeros((10**8, 0), np.uint8), np.zeros((0, 10**8), np.uint8), unit="sm90_wgmma_fp8",
               a_format="e4m3", b_format="e4m3")
    huge = tmp_path / "huge.npy"
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "|u1", "fortran_order": False, "shape": (10**8, 10**8)})
    huge.write_bytes(buf.getvalue())
    rc, err = _cli([*_MM, str(huge), str(b), "-o", str(tmp_path / "d.npy")], capsys)
    assert rc == 2 and err == (f"fmtsim: error: {huge}: not a readable .npy file (its header declares A larger than "
                               f"this machine's memory; the file holds {len(buf.getvalue())} bytes)"), err


def test_memory_error_at_the_cli_edge(monkeypatch, capsys):
    """Any MemoryError out of a command is one line and exit 2, never a traceback."""
    import fmtsim.cli as cli

    def exhausted(args):
        raise MemoryError("Unable to allocate 8.00 EiB for an array")
    parser = cli.build_parser()
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    for action in parser._subparsers._group_actions[0].choices.values():  # every command
        action.set_defaults(func=exhausted)
    for argv in (["table", "e4m3"], ["encode", "e4m3", "1.0"]):
        rc, err = _cli(argv, capsys)
        assert rc == 2 and err == ("fmtsim: error: not enough memory for this command (Unable to allocate 8.00 EiB "
                                   "for an array): give it smaller inputs"), err


# --- optional implementations that are installed but do not import ----------------------------

# what each implementation imports (its packages and the submodules it uses); onnxruntime's
# broken installs are held by their own tests
_OPTIONAL = {"torch": ["torch"], "torchao": ["torch", "torchao"], "mmasim": ["torch", "mmasim"],
             "onnx": ["onnx"], "onnx_spec": ["onnx"], "openvino": ["openvino"], "xla": ["jax", "jaxlib"],
             "gfloat": ["gfloat"], "numkong": ["numkong"]}
_RAISES = {"ImportError": 'raise ImportError("libfoo.so.3: cannot open shared object file")',
           "OSError": 'raise OSError("[WinError 126] The specified module could not be found")',
           "RuntimeError": 'raise RuntimeError("module compiled against ABI version 0x1000009 but this version of '
                           'numpy is 0x2000000")',
           "AttributeError": 'raise AttributeError("module \'numpy\' has no attribute \'float_\'")',
           "SystemExit": "raise SystemExit(3)"}

_IMPORT_CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from fmtsim.conformance.impls import registry
from fmtsim.conformance.impls import mmasim, torchao
got = {name: impl.missing() for name, impl in registry().items() if name in json.loads(sys.argv[2])}
got["mmasim.missing"] = mmasim.missing()
got["torchao.missing"] = torchao.missing()
print(json.dumps(got))
"""


def _broken_packages(tmp_path: Path, body: str, modules) -> Path:
    root = tmp_path / "site"
    for mod in modules:
        (root / mod).mkdir(parents=True, exist_ok=True)
        (root / mod / "__init__.py").write_text(body + "\n")
    return root


@pytest.mark.parametrize("error", list(_RAISES))
def test_an_implementation_that_fails_to_import_is_missing(error, tmp_path):
    """Every optional implementation whose package is installed but raises on import (a missing
    shared library, an ABI mismatch, a package that exits) reports it from missing(), naming
    the package and the error; before, only an uninstalled package was caught and the import
    ended in a traceback (conform --impl mmasim)."""
    mods = sorted({m for ms in _OPTIONAL.values() for m in ms})
    site = _broken_packages(tmp_path, _RAISES[error], mods)
    r = subprocess.run([sys.executable, "-c", _IMPORT_CHILD, str(site), json.dumps(list(_OPTIONAL))],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    # (implementation, the package it imports first) for each missing() asked
    expect = {name: (name, mods_[0]) for name, mods_ in _OPTIONAL.items()}
    expect["mmasim.missing"], expect["torchao.missing"] = ("mmasim", "torch"), ("torchao", "torch")
    detail = {"SystemExit": "3"}.get(error) or _RAISES[error].split('("')[1][:20]
    for name, (impl, mod) in expect.items():
        assert got[name] is not None and got[name].startswith(
            f"{impl}: the {mod} package is installed but does not import ({error}: {detail}"), (name, got[name])


def test_a_missing_submodule_is_named(tmp_path):
    """A package that imports but lacks a submodule the implementation uses (another version)."""
    site = _broken_packages(tmp_path, "", ["torch", "torchao", "mmasim", "openvino", "jax", "jaxlib", "onnx"])
    r = subprocess.run([sys.executable, "-c", _IMPORT_CHILD, str(site), json.dumps(list(_OPTIONAL))],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["mmasim"].startswith("mmasim: the installed mmasim has no mmasim.amd"), got
    assert got["mmasim.missing"].startswith("mmasim: the installed mmasim has no mmasim.amd"), got
    assert got["torchao"].startswith("torchao: the installed torchao has no torchao.prototype.mx_formats.kernels")
    assert got["torchao.missing"] == got["torchao"]
    assert got["openvino"].startswith("openvino: the installed openvino has no openvino.opset13")
    assert got["xla"].startswith("xla: the installed jax has no jax.numpy")
    assert got["onnx"].startswith("onnx: the installed onnx has no onnx.reference.ops.op_cast")


def test_conform_with_mmasim_that_fails_to_import(tmp_path):
    """The CLI: alone, one error line naming the import error (exit 2); with another
    implementation, mmasim is skipped with the reason and the other runs."""
    site = _broken_packages(tmp_path, _RAISES["ImportError"], ["mmasim"])
    if importlib.util.find_spec("torch") is None:  # mmasim needs torch first: a stand-in that imports
        _broken_packages(tmp_path, "", ["torch"])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "fmtsim", "conform", "--impl", "mmasim"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    why = ("mmasim: the mmasim package is installed but does not import (ImportError: libfoo.so.3: cannot open "
           'shared object file) (pip install "fmtsim[mma]")')
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.stderr.strip().splitlines()[-1] == f"fmtsim: error: {why}", r.stderr
    r = subprocess.run([*cmd, "fmtsim", "--quick", "--formats", "e2m1"], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert f"skipped {why}" in r.stdout.splitlines()


# --- arguments that reached numpy, dask or pathlib unchecked -----------------------------------

_MXF4 = np.zeros((2, 32), np.uint8)
_MXF4_KW = dict(unit="sm100_mxf4", a_format="e2m1", b_format="e2m1", a_scales=np.full((2, 1), 127, np.uint8),
                b_scales=np.full((1, 2), 127, np.uint8), scale_format="e8m0")


def _both(**kw):
    """matmul and its Fraction twin on the same arguments: (exception type, message) of each."""
    out = []
    for fn, who in ((matmul, "matmul"), (slow_matmul, "slow_matmul")):
        try:
            fn(_MXF4, _MXF4.T.copy(), **{**_MXF4_KW, **kw})
            out.append((None, who))
        except (TypeError, ValueError) as e:
            out.append((type(e), str(e).replace(who, "WHO", 1)))
    return out


@pytest.mark.parametrize("value, error, message", [
    (32.0, TypeError, "WHO: block_size must be an integer, not float (32.0)"),  # before: numpy's UFuncTypeError
    (np.float64(32), TypeError, "WHO: block_size must be an integer, not float64 (np.float64(32.0))"),
    (np.float32(32), TypeError, "WHO: block_size must be an integer, not float32 (np.float32(32.0))"),
    (True, TypeError, "WHO: block_size must be an integer, not bool (True)"),
    (np.True_, TypeError, "WHO: block_size must be an integer, not bool (np.True_)"),
    ("32", TypeError, "WHO: block_size must be an integer, not str ('32')"),
    ([32], TypeError, "WHO: block_size must be an integer, not list ([32])"),
    (0, ValueError, "WHO: block_size must be at least 1, not 0"),
    (-32, ValueError, "WHO: block_size must be at least 1, not -32"),
    (np.int8(-32), ValueError, "WHO: block_size must be at least 1, not -32"),
    (16, ValueError, "WHO: unit sm100_mxf4 takes block_size 32, not 16"),
])
def test_block_size_is_checked(value, error, message):
    assert _both(block_size=value) == [(error, message)] * 2


@pytest.mark.parametrize("value", [32, np.int64(32), np.uint8(32), np.int32(32)])
def test_block_size_takes_numpy_integers(value):
    """numpy integers are integers (argcheck's rule): the same bits as a Python 32."""
    want = matmul(_MXF4, _MXF4.T.copy(), **_MXF4_KW, block_size=32)
    got = matmul(_MXF4, _MXF4.T.copy(), **_MXF4_KW, block_size=value)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    assert np.array_equal(slow_matmul(_MXF4, _MXF4.T.copy(), **_MXF4_KW, block_size=value).view(np.uint32),
                          want.view(np.uint32))


@pytest.mark.parametrize("name, value, error, message", [
    ("scale_format", 8, TypeError, "WHO: scale_format must be a format name such as 'e4m3', not int (8)"),
    ("a_format", 3, TypeError, "WHO: a_format must be a format name such as 'e4m3', not int (3)"),
    ("b_format", b"e2m1", TypeError, "WHO: b_format must be a format name such as 'e4m3', not bytes (b'e2m1')"),
    ("a_format", None, TypeError, "WHO: codes need a_format and b_format"),  # the twin: "unknown format 'none'"
    ("b_format", "zz", ValueError, "WHO: b_format: unknown format 'zz'"),
    ("scale_format", "", ValueError, "WHO: scale_format: unknown format ''"),
])
def test_format_arguments_are_named(name, value, error, message):
    for got_type, got in _both(block_size=32, **{name: value}):
        assert got_type is error and got.startswith(message), got


@pytest.mark.parametrize("value, why", [
    ("", "it is empty"),  # before: dask's "missing port number in address ''"
    ("   ", "it is empty"),
    ("tcp://host :8786", "it holds white space"),
    ("foo://host:8786", "unknown scheme 'foo'"),  # before: dask's ValueError, then a 60 s wait at exit
    ("tcp://host", "no port number (host:port, e.g. tcp://host:8786)"),
    ("localhost", "no port number (host:port, e.g. tcp://host:8786)"),
    ("tcp://", "no port number (host:port, e.g. tcp://host:8786)"),
    ("[::1]", "no port number (host:port, e.g. tcp://host:8786)"),
    ("tcp://host:http", "port 'http' is not a number 1..65535"),
    ("tcp://host:0", "port '0' is not a number 1..65535"),
    ("tcp://host:65536", "port '65536' is not a number 1..65535"),
    ("inproc://", "no address after the scheme"),
])
def test_scheduler_is_checked(value, why):
    """Refused with the forms it takes named, before Dask is imported or a Client made, and
    before any work (even a matmul run in this process: K = 0)."""
    a = np.zeros((2, 32), np.uint8)
    for b in (a.T.copy(), np.zeros((32, 0), np.uint8)):
        with pytest.raises(ValueError) as got:
            matmul(a, b, unit="sm90_wgmma_fp8", a_format="e4m3", b_format="e4m3", scheduler=value)
        assert str(got.value) == ("matmul: scheduler must be a dask.distributed.Client or an address like "
                                  "'tcp://host:8786' (scheme tcp, tls, ws, wss, inproc, ucx; 'host:port' is tcp), "
                                  f"or None; got {value!r}: {why}")
    with pytest.raises(ValueError, match="scheduler must be a dask.distributed.Client"):
        get_executor(scheduler=value)


@pytest.mark.parametrize("value", [b"tcp://host:8786", 8786, 3.5, ["tcp://host:8786"], True])
def test_scheduler_of_another_type(value):
    with pytest.raises(TypeError, match=f"^matmul: scheduler must be a dask.distributed.Client or an address "
                       f".*, not {type(value).__name__}$"):
        matmul(_MXF4[:, :16], np.zeros((16, 2), np.uint8), unit="sm90_wgmma_fp8", a_format="e4m3",
               b_format="e4m3", scheduler=value)


@pytest.mark.parametrize("value", ["tcp://10.0.0.1:8786", "10.0.0.1:8786", "tls://h.example:8786", "ws://h:1",
                                   "tcp://[::1]:8786", "tcp://:8786", "inproc://10.0.0.1/1234/1", "ucx://h:13337"])
def test_scheduler_addresses_dask_takes_pass(value):
    """What Dask's own parser takes passes the check (distributed.comm.resolve_address, where
    Dask is here)."""
    check_scheduler(value)
    comm = pytest.importorskip("distributed.comm")
    comm.parse_address(value)


def _checkpoint_calls():
    from fmtsim.checkpoint import convert, find_source, load, plan, read_header
    from fmtsim.checkpoint.dequant import dequantize
    from fmtsim.checkpoint.explain import diff, explain
    from fmtsim.checkpoint.inspection import inspect
    from fmtsim.checkpoint.recast import recast

    return {"load": (load, ["path"]), "read_header": (read_header, ["path"]), "find_source": (find_source, ["path"]),
            "plan": (plan, ["path"]), "inspect": (inspect, ["path"]), "convert": (convert, ["src", "out"]),
            "dequantize": (dequantize, ["src", "out"]),
            "recast": (lambda src, out: recast(src, out, to="nvfp4"), ["src", "out"]),
            "explain": (explain, ["quant", "original"]), "diff": (diff, ["a", "b"])}


@pytest.mark.parametrize("value", [None, 123, b"/tmp/model.safetensors", 1.5, ["a.safetensors"]])
@pytest.mark.parametrize("fn", list(_checkpoint_calls()))
def test_checkpoint_paths_are_checked(fn, value, tmp_path):
    """Every public checkpoint function taking paths refuses a value that is no path with a
    TypeError naming the function and the argument (before: pathlib's 'expected str, bytes or
    os.PathLike object, not NoneType')."""
    call, args = _checkpoint_calls()[fn]
    good = str(tmp_path / "in.safetensors")
    for i, name in enumerate(args):
        given = [good if j != i else value for j in range(len(args))]
        if i > 0:
            given[0] = str(tmp_path / "missing-but-a-path.safetensors")
        with pytest.raises(TypeError) as got:
            call(*given)
        assert str(got.value) == (f"{fn}: {name} must be a path (a str or an os.PathLike such as pathlib.Path), "
                                  f"not {type(value).__name__}"), str(got.value)
