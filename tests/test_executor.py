"""fmtsim.executor and the tiled matmul: output tiles give the same bits as one run
(every unit, ragged tile edges, block scales, split_k, promote_every, NaN/Inf operands),
on this process, a local process pool and a Dask LocalCluster; a tile bounds the memory;
progress reaches the total; bad jobs / scheduler / tile arguments are named."""

import tracemalloc

import numpy as np
import pytest

from fmtsim.executor import InProcess, ProcessPool, get_executor
from fmtsim.mma import UNITS, matmul
from fmtsim.mma.arith import operand_table

from .conftest import slow_unless


def bits(x):
    if np.asarray(x).dtype == np.float64:  # the fp64 units' D: its own patterns, not narrowed
        return np.asarray(x).view(np.uint64)
    return np.asarray(x, np.float32).view(np.uint32)


def _square(x):
    return x * x


def _case(rng, unit, m, n, steps, specials=True):
    """Operands for one unit: its first formats (and scales), K ragged against its step
    (unscaled units) so that the zero padding runs in every tile."""
    u = UNITS[unit]
    fa = fb = "e4m3" if "*" in u.formats else u.formats[0]
    sf = u.scale_formats[0] if u.scaled and u.family != "exact" else None
    bs = u.block_sizes[0] if sf else None
    step = 16 if u.family == "fma" else u.k or 32  # an fma unit: 13 and 29 FMAs in a chain
    k = step * steps if sf else step * steps - 3
    c = (rng.standard_normal((m, n)) * 2.0 ** rng.integers(-20, 20, (m, n))).astype(np.float32)
    if u.family == "fma":  # fp32 / fp64 patterns (any, or finite values), an fp32 / fp64 C
        udt = np.uint64 if fa == "fp64" else np.uint32
        vals = (rng.standard_normal((m + n, k)) * 2.0 ** rng.integers(-20, 20, (m + n, k))).astype(u.out_dtype)
        codes = vals.view(udt)
        if specials:
            codes = np.where(rng.random(codes.shape) < 0.2, rng.integers(0, np.iinfo(udt).max, codes.shape,
                                                                         dtype=np.uint64).astype(udt), codes)
        return codes[:m], codes[m:].T.copy(), c.astype(u.out_dtype), dict(unit=unit, a_format=fa, b_format=fb)
    ta, tb = operand_table(fa), operand_table(fb)
    pick = (lambda t, shape: rng.integers(0, t.n_codes, shape)) if specials else \
        (lambda t, shape: rng.choice(np.nonzero(t.cls == 0)[0], shape))
    a, b = pick(ta, (m, k)), pick(tb, (k, n))
    if u.c_format == "fp16":  # these units take an fp16 C: values fp16 holds
        c = (rng.standard_normal((m, n)) * 2.0 ** rng.integers(-10, 10, (m, n))).astype(np.float16).astype(np.float32)
    kw = dict(unit=unit, a_format=fa, b_format=fb)
    if sf:
        lo, hi = (118, 136) if sf == "e8m0" else (0x28, 0x48)
        sa, sb = rng.integers(lo, hi, (m, k // bs)), rng.integers(lo, hi, (k // bs, n))
        if specials and sf == "e8m0":
            sa[0, 0] = 0xFF  # a NaN scale in the first tile
        kw.update(a_scales=sa, b_scales=sb, scale_format=sf, block_size=bs)
    return a, b, c, kw


FAST_UNITS = {"sm90_wgmma_fp8", "sm100_mxf8f6f4"}


@pytest.mark.parametrize("unit", slow_unless(list(UNITS), keep=FAST_UNITS))
def test_tiles_equal_one_run_every_unit(unit, rng):
    u = UNITS[unit]
    a, b, c, kw = _case(rng, unit, 13, 11, 3)
    whole = matmul(a, b, c, **kw)
    step = u.k or (kw.get("block_size") or 1)
    chains = [dict(), dict(split_k=2), dict(promote_every=step)] if u.family != "exact" else [dict(), dict(split_k=2)]
    for extra in chains:
        ref = whole if not extra else matmul(a, b, c, **kw, **extra)
        # 5 x 4 tiles: ragged at both edges (13 = 5 + 5 + 3 rows, 11 = 4 + 4 + 3 columns)
        tiled = matmul(a, b, c, **kw, **extra, jobs=1, tile=(5, 4))
        assert np.array_equal(bits(tiled), bits(ref)), (unit, extra)
    if unit in FAST_UNITS:
        assert np.isnan(whole).any()  # the specials reached some tile


def test_process_pool_equals_one_run(rng):
    a, b, c, kw = _case(rng, "sm90_wgmma_fp8", 24, 20, 4)
    ref = matmul(a, b, c, **kw, promote_every=64)
    seen = []
    got = matmul(a, b, c, **kw, promote_every=64, jobs=2, tile=(7, 9), progress=lambda d, t: seen.append((d, t)))
    assert np.array_equal(bits(got), bits(ref))
    total = 24 * 20 * a.shape[1]
    assert seen[-1] == (total, total) and len(seen) == 4 * 3
    assert all(x[0] < y[0] for x, y in zip(seen, seen[1:], strict=False))


@pytest.mark.slow
@pytest.mark.parametrize("unit", list(UNITS))
def test_process_pool_every_unit(unit, rng):
    a, b, c, kw = _case(rng, unit, 17, 9, 2)
    assert np.array_equal(bits(matmul(a, b, c, **kw, jobs=2, tile=(6, 5))), bits(matmul(a, b, c, **kw)))


@pytest.mark.slow
def test_dask_local_cluster_equals_one_run(rng):
    distributed = pytest.importorskip("dask.distributed", reason="the Dask path needs fmtsim[dask]")
    a, b, c, kw = _case(rng, "sm100_mxf8f6f4", 20, 18, 2)
    ref = matmul(a, b, c, **kw, split_k=2)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            got = matmul(a, b, c, **kw, split_k=2, scheduler=client, tile=(8, 7))
            assert np.array_equal(bits(got), bits(ref))
            assert client.status == "running"  # a Client given in is left open
        # an address: fmtsim opens its own Client and closes it again
        got = matmul(a, b, c, **kw, split_k=2, scheduler=cluster.scheduler_address)
        assert np.array_equal(bits(got), bits(ref))
    with pytest.raises(TypeError, match="scheduler must be a dask.distributed.Client or an address"):
        matmul(a, b, c, **kw, scheduler=3)


@pytest.mark.slow  # tracemalloc slows every allocation: about 10 s
def test_memory_is_bounded_by_the_tile(rng):
    a, b, c, kw = _case(rng, "sm90_wgmma_fp8", 96, 96, 64, specials=False)
    peaks = []
    for extra in (dict(), dict(jobs=1, tile=24)):
        tracemalloc.start()
        d = matmul(a, b, c, **kw, **extra)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        del d
    # the whole run splits all of A and B (17 bytes a code, 6.6 MB here); a tile 24 rows and columns
    assert peaks[1] * 2 < peaks[0], peaks


def test_executor_runs_pieces_in_order():
    assert list(InProcess().imap(_square, range(5))) == [0, 1, 4, 9, 16]
    with ProcessPool(2) as ex:
        assert list(ex.imap(_square, range(9))) == [x * x for x in range(9)]
    assert isinstance(get_executor(), InProcess) and isinstance(get_executor(jobs=8, pieces=1), InProcess)


def test_bad_arguments_are_named(rng):
    a, b, c, kw = _case(rng, "sm90_wgmma_fp8", 4, 4, 1)
    with pytest.raises(ValueError, match="jobs must be at least 1"):
        matmul(a, b, c, **kw, jobs=0)
    with pytest.raises(TypeError, match="jobs must be an integer"):
        matmul(a, b, c, **kw, jobs="2")
    with pytest.raises(ValueError, match="give jobs or scheduler, not both"):
        matmul(a, b, c, **kw, jobs=2, scheduler="tcp://127.0.0.1:1")
    with pytest.raises(ValueError, match="tile must be positive"):
        matmul(a, b, c, **kw, jobs=1, tile=(0, 4))
    # the chaining arguments are checked before any tile runs
    with pytest.raises(ValueError, match="promote_every must be a positive multiple"):
        matmul(a, b, c, **kw, jobs=2, promote_every=7)


def test_sweep_input_ranges_on_the_executor():
    """tools/sweep.py splits the patterns into input ranges: two processes count the same."""
    import sweep

    from fmtsim.policy import resolve

    p = resolve("e2m1", profile="ml_dtypes")
    runs = []
    for jobs in (None, 2):
        r = sweep.sweep("e2m1", p.rounding, p.on_overflow.mode, p.on_nan.mode, "ml_dtypes", 1 << 15, progress=False,
                        jobs=jobs,
                        start=(1 << 31) - (1 << 16), stop=(1 << 31) + (1 << 16) + 12345)
        for k in ("wall s", "oracle table s"):
            r.pop(k)
        runs.append(r)
    assert runs[0] == runs[1]
    assert runs[0]["patterns"] == (2 << 16) + 12345 and runs[0]["mismatches vs oracle"] == 0


@pytest.mark.slow
def test_production_size_check_tool_at_a_small_size(tmp_path):
    """tools/check_8192.py (the README's 8192^3 record) end to end at 64^3: one process and
    two agree bit for bit, and the spot checks (numpy engine, Fraction twin) pass."""
    import subprocess
    import sys
    from pathlib import Path

    tool = Path(__file__).resolve().parents[1] / "tools" / "check_8192.py"
    r = subprocess.run([sys.executable, str(tool), "--dir", str(tmp_path), "--size", "64", "--jobs", "2",
                        "--no-dask", "--spot", "16", "--twin", "2"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "D identical bit for bit across the runs: True" in r.stdout
    assert "numpy engine, 16 x 16 outputs: 0 differ" in r.stdout and "Fraction twin, 2 outputs: 0 differ" in r.stdout
    # and an NVFP4 GEMM (UE4M3 scales per 16) on the block-scaled FP4 unit
    r = subprocess.run([sys.executable, str(tool), "--dir", str(tmp_path / "fp4"), "--size", "64", "--jobs", "2",
                        "--no-dask", "--spot", "16", "--twin", "2", "--unit", "sm100_mxf4nvf4", "--format", "e2m1"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ue4m3 scales per 16" in r.stdout and "D identical bit for bit across the runs: True" in r.stdout
    assert "numpy engine, 16 x 16 outputs: 0 differ" in r.stdout and "Fraction twin, 2 outputs: 0 differ" in r.stdout
