"""The fourth bad-input tour's misleading messages: an optional implementation installed but
broken or too old (it ran and "failed" every case of correct rules), count options the CLI
accepted where the API refused them (``--jobs 0``) or that blamed another argument
(``--block-size 0`` "needs the scale options", ``-32`` blamed the scales file), numpy integers
refused as ``jobs``, a ``split_k`` silently cut to what K allows, conform's "nothing to check"
naming PyTorch for ml_dtypes, and a CUDA toolkit older than the headers the shim needs reported
as no headers at all."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fmtsim import argcheck
from fmtsim.checkpoint.files import CheckpointError, worker_count
from fmtsim.cli import main
from fmtsim.conformance.adapters import Adapter
from fmtsim.conformance.impls import cuda
from fmtsim.conformance.plugin import Decoder, Implementation, Request
from fmtsim.conformance.run import run
from fmtsim.executor import InProcess, ProcessPool, get_executor
from fmtsim.mma import matmul


def _cli(argv, capsys) -> tuple[int, str, str]:
    try:
        rc = main(argv)
    except SystemExit as e:  # argparse's own exit
        rc = e.code
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    return rc, out.out, out.err.strip()


# --- an implementation that imports but cannot run -----------------------------------------------

class _Broken(Implementation):
    """Imports fine; every entry point raises, as an old onnxruntime without SessionOptions did."""

    name = "broken_peer"
    capabilities = ("decode", "encode")
    checked_with = "broken_peer 9.9"

    def __init__(self, error: BaseException, works: str = ""):
        self.error, self.works = error, works

    def _call(self, label: str):
        def call(*args):
            if label == self.works:
                return np.zeros(np.asarray(args[0]).size, np.uint8)
            raise self.error
        return call

    def decoders(self, req):
        return [Decoder("broken_peer.decode", self._call("decode"), ("e4m3",))]

    def encoders(self, req):
        return [Adapter("broken_peer[a]", self._call("a"), formats=("e4m3",)),
                Adapter("broken_peer[b]", self._call("b"), formats=("e4m3",), sources=("bfloat16",))]


@pytest.fixture
def registered(monkeypatch):
    from fmtsim.conformance import impls

    def put(impl):
        table = dict(impls.registry())
        table[impl.name] = impl
        monkeypatch.setattr(impls, "registry", lambda: table)
        return impl
    return put


@pytest.mark.parametrize("error", [AttributeError("module 'onnxruntime' has no attribute 'SessionOptions'"),
                                   RuntimeError("Unsupported data type: float8e4m3fn"), SystemExit(3)])
def test_every_entry_point_failing_is_a_reason_not_failures(error, registered):
    """Before: the run went ahead and reported 12,352 "unexpected failures" of correct rules."""
    impl = registered(_Broken(error))
    req = Request(("e4m3",), None, None, True, big=False)
    why = impl.cannot_run(req)
    assert why is not None and why.startswith(f"broken_peer: every entry point fails on a single value here "
                                              f"(broken_peer.decode: {type(error).__name__}")
    assert "and 2 more" in why and "read off broken_peer 9.9" in why
    with pytest.raises(ValueError, match="broken_peer: every entry point fails"):
        run(("broken_peer",), ["e4m3"], big=False)
    skipped: list[str] = []
    rows = run(("broken_peer", "fmtsim"), ["e4m3"], big=False, skipped=skipped)
    assert skipped == [why] and rows and all(r.impl != "broken_peer" for r in rows)
    assert sum(r.failed for r in rows) == 0


def test_one_working_entry_point_runs_the_rest_and_shows_their_failures(registered):
    """Only an implementation none of whose entry points work is refused: a partly broken one
    runs, and its broken entry points' failures are what the user must see."""
    impl = registered(_Broken(AttributeError("no attribute 'cast'"), works="b"))
    assert impl.cannot_run(Request(("e4m3",), None, None, True, big=False)) is None
    rows = run(("broken_peer",), ["e4m3"], big=False)
    assert any(r.failed for r in rows if r.impl == "broken_peer[a]")


def test_conform_skips_a_broken_second_implementation(registered, capsys):
    registered(_Broken(AttributeError("no attribute 'SessionOptions'")))
    rc, out, err = _cli(["conform", "--impl", "broken_peer", "fmtsim", "--formats", "e4m3", "--quick"], capsys)
    assert rc == 0, err
    assert "skipped broken_peer: every entry point fails on a single value here" in out
    rc, out, err = _cli(["conform", "--impl", "broken_peer", "--formats", "e4m3", "--quick"], capsys)
    assert rc == 2 and err.startswith("fmtsim: error: broken_peer: every entry point fails"), err
    assert "unexpected" not in out


_OLD_ORT = '''__version__ = "1.10.0"
def get_available_providers():
    return ["CPUExecutionProvider"]
class InferenceSession:
    def __init__(self, *a, **k):
        raise RuntimeError("[ONNXRuntimeError] : 10 : INVALID_GRAPH : This is an invalid model. Type Error: "
                           "Type 'tensor(float8e4m3fn)' of input parameter (x) of operator (Cast) is invalid.")
'''


@pytest.mark.skipif(importlib.util.find_spec("onnx") is None,
                    reason="the onnxruntime implementation builds its Cast models with onnx, not installed here")
@pytest.mark.parametrize("body, why", [
    ('raise ImportError("libonnxruntime.so.1.32.0: cannot open shared object file")', "is installed but does not "
     "import (ImportError: libonnxruntime.so.1.32.0"),
    ('raise RuntimeError("onnxruntime was built with AVX2; this CPU lacks it")', "is installed but does not import "
     "(RuntimeError: onnxruntime was built"),
    (_OLD_ORT, "installed: onnxruntime 1.10.0"),
])
def test_conform_with_a_broken_or_old_onnxruntime(tmp_path, body, why):
    """The real command in a child process, with a stand-in onnxruntime package first on its path."""
    site = tmp_path / "site"
    (site / "onnxruntime").mkdir(parents=True)
    (site / "onnxruntime" / "__init__.py").write_text(body)
    dist = site / "onnxruntime-1.10.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: onnxruntime\nVersion: 1.10.0\n")
    env = {**os.environ, "PYTHONPATH": str(site)}
    cmd = [sys.executable, "-m", "fmtsim", "conform", "--formats", "e4m3", "--quick", "--impl"]
    alone = subprocess.run([*cmd, "onnxruntime"], capture_output=True, text=True, env=env, timeout=600)
    assert alone.returncode == 2 and "Traceback" not in alone.stderr, alone.stderr[-2000:]
    assert alone.stderr.startswith("fmtsim: error: onnxruntime: ") and why in alone.stderr, alone.stderr
    assert "unexpected failures" not in alone.stdout
    both = subprocess.run([*cmd, "onnxruntime", "ml_dtypes"], capture_output=True, text=True, env=env, timeout=600)
    assert both.returncode == 0, both.stderr[-2000:]
    assert "skipped onnxruntime: " in both.stdout and " 0 unexpected failures" in both.stdout


def test_nothing_to_check_names_what_the_implementation_checks(capsys):
    """Before: "PyTorch casts only to FP8/E8M0" for ml_dtypes and int2."""
    rc, _, err = _cli(["conform", "--impl", "ml_dtypes", "--formats", "int2"], capsys)
    assert rc == 2 and "PyTorch" not in err, err
    assert "(ml_dtypes checks formats e2m1 " in err and " e8m0)" in err


def test_covers_lists_decode_and_encode_formats_and_row_kinds(registered):
    impl = registered(_Broken(AttributeError("x")))
    assert impl.covers() == "formats e4m3"
    from fmtsim.conformance.impls import get_implementation
    assert "every format against the exact oracle" in get_implementation("fmtsim").covers()


# --- count options: the CLI refuses what the API refuses, naming the option ----------------------

_MATMUL = ["mma", "matmul", "a.npy", "b.npy", "--unit", "sm100_mxf8f6f4", "--a-format", "e4m3", "--b-format",
           "e4m3", "-o", "d.npy"]
_COUNTS = [(_MATMUL, "--jobs", 1), (_MATMUL, "--block-size", 1), (_MATMUL, "--promote-every", 1),
           (_MATMUL, "--split-k", 1), (["ver", "all"], "--errors", 0), (["gen", "all"], "--seed", 0),
           (["probe", "gen"], "--seed", 0), (["checkpoint", "convert", "in", "out"], "--jobs", 1),
           (["checkpoint", "dequantize", "in", "out"], "--jobs", 1)]


@pytest.mark.parametrize("argv, option, low, value", [
    (argv, option, low, value) for argv, option, low in _COUNTS for value in ("0", "-1", "-32", "2.0", "x", "")
    if not (value.lstrip("-").isdigit() and int(value) >= low)],  # --errors 0 and --seed 0 are valid
    ids=lambda v: v if isinstance(v, str) else None)
def test_count_options_are_checked_at_parse_time(argv, option, low, value, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing is read or written: the parser refuses first
    rc, _, err = _cli([*argv, f"{option}={value}"], capsys)
    assert rc == 2
    want = "takes a whole number" if not value.lstrip("-").isdigit() else f"must be at least {low}, not {value}"
    assert f"argument {option}: {want}" in err, err
    assert not list(tmp_path.iterdir())


def test_cli_integer_is_argcheck_integer():
    parse = argcheck.cli_integer("--jobs", low=1)
    assert parse(" 3 ") == 3 and parse("+2") == 2
    import argparse
    for bad in ("0", "1e3", "0x10", "three"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse(bad)


@pytest.mark.parametrize("value", [np.int64(2), np.int32(2), np.uint8(2), 2])
def test_jobs_takes_numpy_integers(value):
    """Before: jobs=np.int64(2) was refused though every other integer argument takes it."""
    assert argcheck.jobs(value) == 2
    ex = get_executor(value, pieces=4)
    assert isinstance(ex, (ProcessPool, InProcess))  # InProcess on a 1-CPU machine
    assert worker_count(value, 4) == min(2, os.cpu_count() or 1)
    a = np.arange(64, dtype=np.uint8).reshape(8, 8) % 0x40 + 0x20  # e4m3 codes
    kw = dict(unit="sm89_mma_fp8", a_format="e4m3", b_format="e4m3")
    a = np.tile(a, (1, 4))
    assert np.array_equal(matmul(a, a.T, jobs=value, tile=4, **kw).view(np.uint32),
                          matmul(a, a.T, **kw).view(np.uint32))


@pytest.mark.parametrize("value, error", [(0, ValueError), (-1, ValueError), (True, TypeError),
                                          (2.0, TypeError), ("2", TypeError), (np.float64(2), TypeError)])
def test_jobs_refusals_agree_everywhere(value, error):
    with pytest.raises(error, match="jobs must be"):
        get_executor(value)
    with pytest.raises(error, match="jobs must be"):
        matmul(np.zeros((2, 32), np.uint8), np.zeros((32, 2), np.uint8), unit="sm89_mma_fp8", a_format="e4m3",
               b_format="e4m3", jobs=value)
    with pytest.raises(CheckpointError, match="--jobs must be"):
        worker_count(value, 4)


# --- the block-scale options of mma matmul --------------------------------------------------------

@pytest.fixture
def operands(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    np.save("a.npy", np.full((4, 64), 0x38, np.uint8))
    np.save("b.npy", np.full((64, 4), 0x38, np.uint8))
    np.save("as.npy", np.full((4, 2), 127, np.uint8))
    np.save("bs.npy", np.full((2, 4), 127, np.uint8))
    return tmp_path


_SCALED = [*_MATMUL, "--a-scales", "as.npy", "--b-scales", "bs.npy"]


@pytest.mark.parametrize("extra, message", [
    (["--scale-format", "e8m0", "--block-size", "16"], "--block-size 16: unit sm100_mxf8f6f4 takes block size 32"),
    (["--scale-format", "e8m0", "--block-size", "64"], "--block-size 64: unit sm100_mxf8f6f4 takes block size 32"),
    (["--block-size", "32"], "block scales need --a-scales, --b-scales, --scale-format and --block-size: "
                             "--scale-format not given"),
    (["--scale-format", "e8m0"], "--block-size not given"),
])
def test_block_size_is_named_before_any_scales_file_is_blamed(operands, extra, message, capsys):
    """Before: --block-size 0 said the scale options were missing, -32 and 16 blamed as.npy."""
    rc, _, err = _cli([*_SCALED, *extra], capsys)
    assert rc == 2 and err.endswith(message), err
    assert not (operands / "d.npy").exists()


def test_a_unit_without_block_scales_says_so(operands, capsys):
    argv = [a if a != "sm100_mxf8f6f4" else "sm89_mma_fp8" for a in _SCALED]
    rc, _, err = _cli([*argv, "--scale-format", "e8m0", "--block-size", "32"], capsys)
    assert rc == 2 and err.endswith("unit sm89_mma_fp8 has no block scales: leave out --a-scales, --b-scales, "
                                    "--scale-format and --block-size"), err


def test_the_right_block_size_runs(operands, capsys):
    rc, out, err = _cli([*_SCALED, "--scale-format", "e8m0", "--block-size", "32"], capsys)
    assert rc == 0, err
    d = np.load(operands / "d.npy")
    assert d.shape == (4, 4) and np.all(d == 64.0)  # 64 products of 1.0 x 1.0, scales 2^0


# --- split_k: never fewer slices than asked ------------------------------------------------------

def test_split_k_beyond_the_steps_of_k_is_refused():
    """Before: split_k=100 over K=32 in steps of 16 ran as 2 slices, silently."""
    a, b = np.full((2, 32), 0x38, np.uint8), np.full((32, 2), 0x38, np.uint8)
    kw = dict(unit="sm89_mma_fp8", a_format="e4m3", b_format="e4m3")
    assert np.all(matmul(a, b, split_k=2, **kw) == 32.0)
    for n in (3, 100):
        with pytest.raises(ValueError, match=rf"split_k {n} is more slices than K=32 has steps of the unit's K "
                                             r"\(16\): at most 2"):
            matmul(a, b, split_k=n, **kw)


# --- a CUDA toolkit older than the headers the shim needs -----------------------------------------

def test_a_cuda_toolkit_before_12_8_is_named(tmp_path, monkeypatch):
    """Before: a CUDA 12.4 toolkit (cuda_fp8.h, no cuda_fp4.h) was passed over and the user told no
    headers were found at all."""
    inc = tmp_path / "cuda-12.4" / "include"
    inc.mkdir(parents=True)
    (inc / "cuda_fp8.h").write_text("/* CUDA 12.4 */\n")
    (inc / "cuda_runtime_api.h").write_text("#define CUDART_VERSION 12040\n")
    monkeypatch.setenv("CUDA_HOME", str(inc.parent))
    monkeypatch.setattr(cuda, "find_nvcc", lambda: None)
    monkeypatch.setattr(cuda, "wheel_include_dirs", lambda: None)
    monkeypatch.setattr(cuda, "Path", _only_under(tmp_path))
    cuda._lib.cache_clear()
    try:
        why = cuda.missing()
    finally:
        cuda._lib.cache_clear()
    assert why is not None and f"the CUDA 12.4 headers at {inc} predate CUDA 12.8" in why, why


def test_headers_found_but_too_old_are_named(tmp_path, monkeypatch):
    """A complete-looking include folder whose CUDART_VERSION is before 12.8 (e.g. hand-copied)."""
    inc = tmp_path / "include"
    inc.mkdir()
    for h in ("cuda_fp8.h", "cuda_fp4.h"):
        (inc / h).write_text("\n")
    (inc / "cuda_runtime_api.h").write_text("#define CUDART_VERSION 12060\n")
    monkeypatch.setattr(cuda, "find_include_dirs", lambda: ([inc], "$CUDA_HOME"))
    cuda._lib.cache_clear()
    try:
        why = cuda.missing()
    finally:
        cuda._lib.cache_clear()
    assert why is not None and "are CUDA 12.6; the shim needs CUDA 12.8 or later" in why, why


def _only_under(root: Path):
    """pathlib.Path, but /usr/local/cuda (a real toolkit on this machine) looks absent."""
    class P(type(Path())):
        def is_file(self) -> bool:
            return str(self).startswith(str(root)) and super().is_file()
    return P
