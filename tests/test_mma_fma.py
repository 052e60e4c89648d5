"""The fma units (fp64 mma, fp32 / fp64 MFMA: chains of exactly rounded FMAs): the numpy
fast path against the Fraction twin and against a real std::fma (MMA-Sim's C++ kernel),
bad input, the CLI, their GEMM vector files and their rows in ``conform --impl mmasim``."""

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fmtsim.cli import main
from fmtsim.mma import UNITS, Unit, matmul, slow_matmul
from fmtsim.mma import fma as fma_mod
from fmtsim.mma.slow import _fma_exact

from .conftest import examples, slow_unless

VEC = Path(__file__).resolve().parent.parent / "vectors"
FMA_UNITS = [u.name for u in UNITS.values() if u.family == "fma"]
TIERED = slow_unless(FMA_UNITS, keep={"sm80_mma_fp64"})  # the other two in the full tier
SPEC = {"fp32": (np.uint32, np.float32, 23, 127, -149), "fp64": (np.uint64, np.float64, 52, 1023, -1074)}


def bits(x):
    x = np.asarray(x)
    return x.view(np.uint64 if x.dtype == np.float64 else np.uint32)


def _pools(rng, fmt, n):
    """(a, b, c) float arrays of n lanes mixing: random patterns over the whole range, ordinary
    values, ties (a product of exactly half an ulp of C, times an odd number), cancellations
    (C = -RN(a b) plus or minus an ulp), double-rounding traps, subnormal factors, products straddling the bottom and
    the top of the range, signed zeros, Inf and NaN."""
    udt, fdt, man, emax, etiny = SPEC[fmt]
    hi = np.iinfo(udt).max

    def vals(lo, top, size=n):
        return (rng.choice([-1.0, 1.0], size) * (1 + rng.random(size)) * np.exp2(rng.integers(lo, top + 1, size))
                ).astype(fdt)

    def rand_bits(size=n):
        return rng.integers(0, hi, size, dtype=np.uint64, endpoint=True).astype(udt).view(fdt)

    kind = rng.integers(0, 9, n)
    a, b, c = vals(-30, 30), vals(-30, 30), vals(-30, 30)
    r = kind == 0  # any patterns
    a[r], b[r], c[r] = rand_bits(r.sum()), rand_bits(r.sum()), rand_bits(r.sum())
    t = kind == 1  # ties: p = odd * ulp(c) / 2
    cu = vals(-200 if fmt == "fp64" else -100, 200 if fmt == "fp64" else 100, t.sum())
    e = np.frexp(cu)[1] - 1
    a[t] = np.ldexp(np.ones(t.sum()), e - man - 1).astype(fdt)
    b[t] = rng.choice([1.0, -1.0, 3.0, -3.0, 5.0], t.sum()).astype(fdt)
    c[t] = cu
    x = kind == 2  # cancellation: C = -RN(a b), nudged by an ulp
    with np.errstate(over="ignore", under="ignore"):
        p = (a[x] * b[x]).astype(fdt)
    c[x] = np.where(rng.random(x.sum()) < 0.5, -p, np.nextafter(-p, rng.choice([-np.inf, np.inf], x.sum())))
    s = kind == 3  # subnormal factor against a lift toward the normal range
    a[s] = rng.integers(1, 1 << man, s.sum(), dtype=np.uint64).astype(udt).view(fdt)
    b[s] = vals(-8, man // 2, s.sum())
    c[s] = np.where(rng.random(s.sum()) < 0.5, 0.0, rng.integers(1, 1 << man, s.sum(), dtype=np.uint64)
                    .astype(udt).view(fdt))
    lo = kind == 4  # products around 2^-960 .. the subnormal range (fp64's exact-integer boundary)
    bottom = -960 if fmt == "fp64" else -126
    a[lo], b[lo] = vals(bottom // 2 - 60, bottom // 2 + 5, lo.sum()), vals(bottom // 2 - 60, bottom // 2 + 5, lo.sum())
    c[lo] = np.where(rng.random(lo.sum()) < 0.5, 0.0, vals(bottom - 70, bottom + 5, lo.sum()))
    top = kind == 5  # products near the top: overflow or not, against a large C
    a[top], b[top] = vals(emax // 2 - 2, emax // 2, top.sum()), vals(emax // 2 - 2, emax // 2 + 1, top.sum())
    c[top] = vals(emax - 3, emax, top.sum())
    dr = kind == 7  # double-rounding traps: C odd, a b = ulp(C) / 2 * (1 - 2^-2man), just below the tie
    cd = vals(-60, 60, dr.sum())
    cd = (cd.view(udt) | udt(1)).view(fdt)
    ed = np.frexp(cd)[1] - 1
    a[dr] = np.ldexp(np.sign(cd) * (1 + 2.0**-man), ed - man - 1).astype(fdt)
    b[dr] = fdt(1 - 2.0**-man)
    c[dr] = cd
    z = kind == 6  # signed zeros and specials
    pool = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0], fdt)
    a[z], b[z], c[z] = rng.choice(pool, z.sum()), rng.choice(pool, z.sum()), rng.choice(pool, z.sum())
    return a, b, c


def _exact(a, b, c, fmt):
    return np.array([_fma_exact(float(x), float(y), float(w), fmt) for x, y, w in zip(a, b, c, strict=True)],
                    SPEC[fmt][1])


def _same(x, y):
    return (bits(x) == bits(y)) | (np.isnan(x) & np.isnan(y))


@pytest.mark.parametrize("fmt", ["fp32", "fp64"])
def test_fma_equals_the_exact_rounding_lane_by_lane(fmt, rng, monkeypatch):
    """fma32 / fma64 against the Fraction rounding of the exact a b + c, one lane at a time, on
    ties, cancellations, subnormals, both ends of the range, signed zeros, Inf and NaN; and fp64's
    two paths both run (Boldo-Melquiond's emulation, the exact-integer lanes)."""
    calls = []
    real = fma_mod._exact64
    monkeypatch.setattr(fma_mod, "_exact64", lambda *v: calls.append(v) or real(*v))
    a, b, c = _pools(rng, fmt, 4000)
    fast = fma_mod.fma(a, b, c)
    assert fast.dtype == SPEC[fmt][1]
    want = _exact(a, b, c, fmt)
    ok = _same(fast, want)
    assert ok.all(), [(float(a[i]), float(b[i]), float(c[i]), float(fast[i]), float(want[i]))
                      for i in np.nonzero(~ok)[0][:5]]
    # the cases reach what they are for: exact zeros of both signs, subnormal and infinite results
    assert (bits(want) == bits(np.array(-0.0, want.dtype))).any() and (want == 0).sum() > 10
    tiny = np.abs(want) < np.exp2(-1022 if fmt == "fp64" else -126)
    assert (tiny & (want != 0)).sum() > 50 and np.isinf(want).sum() > 20
    # the emulation matters: a float64 sum cast to fp32 (fp64: a * b + c) rounds twice
    with np.errstate(invalid="ignore", over="ignore"):
        naive = (a.astype(np.float64) * b + c).astype(SPEC[fmt][1])
    assert (~_same(naive, want)).sum() > 20
    if fmt == "fp64":
        assert 100 < len(calls) < len(a) // 2  # the integer path runs only for the extreme lanes
        calls.clear()
        ordinary = [x[(np.abs(x) > 2.0**-60) & (np.abs(x) < 2.0**60)] for x in (a, b, c)]
        n = min(map(len, ordinary))
        fma_mod.fma64(*(x[:n] for x in ordinary))
        assert not calls  # operands within 2^+-60: Boldo-Melquiond's emulation alone


@settings(max_examples=examples(300), deadline=None)
@given(fmt=st.sampled_from(["fp32", "fp64"]), data=st.data())
def test_hypothesis_fma_equals_the_exact_rounding(fmt, data):
    """Hypothesis's own float edges (subnormals, the largest finite, signed zeros, Inf, NaN),
    and C = -a b nudged, through the fast path one lane at a time."""
    width = 64 if fmt == "fp64" else 32
    fl = st.floats(width=width, allow_nan=True, allow_infinity=True, allow_subnormal=True)
    x, y, z = data.draw(fl), data.draw(fl), data.draw(fl)
    if data.draw(st.booleans()):  # cancellation: C = -RN(x y) or its neighbour
        with np.errstate(all="ignore"):
            p = SPEC[fmt][1](x) * SPEC[fmt][1](y)
            z = float(np.nextafter(-p, SPEC[fmt][1](data.draw(st.sampled_from([-np.inf, np.inf]))))
                      if data.draw(st.booleans()) else -p)
    a, b, c = (np.array([v], SPEC[fmt][1]) for v in (x, y, z))
    assert _same(fma_mod.fma(a, b, c), _exact(a, b, c, fmt)).all(), (x, y, z)


@pytest.mark.parametrize("fmt", ["fp32", "fp64"])
def test_fma_equals_std_fma(fmt, rng):
    """An independent implementation: MMA-Sim's C++ kernel (std::fma, arithmetic/fma_cpu.cpp)
    on 60000 lanes of the same mixtures, bit for bit (any NaN matches NaN)."""
    torch = pytest.importorskip("torch", reason="std::fma comes through mmasim, which needs torch")
    pytest.importorskip("mmasim", reason="mmasim is not installed (pip install 'fmtsim[mma]')")
    from mmasim.arithmetic.fma import fma_cpu

    a, b, c = _pools(rng, fmt, 60000)
    theirs = fma_cpu(*(torch.from_numpy(np.ascontiguousarray(x)) for x in (a, b, c))).numpy()
    ours = fma_mod.fma(a, b, c)
    assert _same(ours, theirs).all()


@pytest.mark.parametrize("unit", slow_unless(FMA_UNITS, keep={"cdna1_mfma_fp32", "sm80_mma_fp64"}))
def test_matmul_equals_the_fraction_twin(unit, rng):
    """matmul (the fast chain, split-K and promotion included) against slow_matmul."""
    u = UNITS[unit]
    fmt = u.formats[0]
    udt, fdt = SPEC[fmt][:2]
    m, n, k = 4, 3, 12
    for trial in range(3):
        a, b, _ = _pools(rng, fmt, m * k)
        b2, _, c = _pools(rng, fmt, k * n)
        A, B = a.reshape(m, k).view(udt), b2.reshape(k, n).view(udt)
        C = c[: m * n].reshape(m, n)
        if trial == 2:  # ordinary values only: long finite chains
            A = (rng.standard_normal((m, k)) * 2.0 ** rng.integers(-8, 8, (m, k))).astype(fdt).view(udt)
            B = (rng.standard_normal((k, n)) * 2.0 ** rng.integers(-8, 8, (k, n))).astype(fdt).view(udt)
        for extra in ({}, {"split_k": 3}, {"promote_every": 4}, {"split_k": [5]}):
            kw = dict(unit=unit, a_format=fmt, b_format=fmt, **extra)
            d = matmul(A, B, C, **kw)
            assert d.dtype == u.out_dtype
            assert np.array_equal(bits(d), bits(slow_matmul(A, B, C, **kw))), (trial, extra)


def test_fp64_values_are_never_narrowed():
    x = 1 + 2.0**-40  # no fp32 value
    c = np.full((2, 2), x)
    a = np.zeros((2, 3), np.uint64)
    d = matmul(a, a.T.copy(), c, unit="sm80_mma_fp64", a_format="fp64", b_format="fp64")
    assert d.dtype == np.float64 and (d == x).all()
    one = np.float64(1.0).view(np.uint64)
    d = matmul(np.full((1, 1), one), np.full((1, 1), np.float64(2.0**-40).view(np.uint64)), np.ones((1, 1)),
               unit="cdna2_mfma_fp64", a_format="f64", b_format="double")
    assert d[0, 0] == x
    with pytest.raises(ValueError, match="is not an fp32 value"):
        matmul(np.zeros((2, 3), np.uint32), np.zeros((3, 2), np.uint32), c, unit="cdna1_mfma_fp32",
               a_format="fp32", b_format="fp32")
    # a NaN result is the canonical pattern of its width
    nan = np.float64(np.nan).view(np.uint64)
    d = matmul(np.full((1, 2), nan), np.full((2, 1), one), unit="sm80_mma_fp64", a_format="fp64", b_format="fp64")
    assert bits(d)[0, 0] == 0x7FFFFFFFFFFFFFFF


@pytest.mark.parametrize("kw,err,needle", [
    (dict(unit="sm80_mma_fp64", a_format="fp32", b_format="fp32"), ValueError, "does not take a_format=fp32"),
    (dict(unit="sm90_wgmma_fp8", a_format="fp64", b_format="fp64"), ValueError, "does not take a_format=fp64"),
    (dict(unit="cdna1_mfma_fp32", a_format="fp64", b_format="fp64"), ValueError, "does not take a_format=fp64"),
    (dict(unit="sm80_mma_fp64", a_format="fp64", b_format="fp64", a=-1), ValueError, "is not a fp64 bit pattern"),
    (dict(unit="cdna1_mfma_fp32", a_format="fp32", b_format="fp32", a=1 << 32), ValueError,
     "is not a fp32 bit pattern"),
    (dict(unit="sm80_mma_fp64", a_format="fp64", b_format="fp64", a=0.5), TypeError, "fp32 / fp64 arrays as uint32"),
])
def test_bad_operands_are_refused(kw, err, needle):
    kw = dict(kw)
    fill = kw.pop("a", 0)
    a = np.full((2, 2), fill, np.float64 if isinstance(fill, float) else np.int64)
    with pytest.raises(err, match=needle):
        matmul(a, np.zeros((2, 2), np.int64), **kw)


@pytest.mark.parametrize("change,needle", [
    (dict(output="rne_fp32"), "must be 'rne_fp64' and 'fp64'"),
    (dict(k=4), "must be 1 for the fma family"),
    (dict(formats=("fp64", "fp32")), r"must be \('fp32',\) or \('fp64',\)"),
    (dict(family="nv", fraction_bits=25), "takes fp32 / fp64 operands or output only as 'fma'"),
])
def test_unit_records_are_validated(change, needle):
    with pytest.raises(ValueError, match=needle):
        replace(UNITS["sm80_mma_fp64"], **change)
    with pytest.raises(ValueError, match="only as 'fma'"):
        Unit("x", "exact", 0, formats=("fp32",))


def test_cli_matmul_fp64(tmp_path, capsys, rng):
    a = rng.standard_normal((5, 7))
    b = rng.standard_normal((7, 3))
    c = rng.standard_normal((5, 3))
    for name, arr in (("a", a), ("b", b), ("c", c)):
        np.save(tmp_path / f"{name}.npy", arr)
    (tmp_path / "a.bin").write_bytes(a.view(np.uint64).astype("<u8").tobytes())
    want = matmul(a.view(np.uint64), b.view(np.uint64), c, unit="sm80_mma_fp64", a_format="fp64", b_format="fp64")
    assert main(["mma", "matmul", str(tmp_path / "a.npy"), str(tmp_path / "b.npy"), str(tmp_path / "c.npy"),
                 "--unit", "sm80_mma_fp64", "--a-format", "fp64", "--b-format", "fp64",
                 "-o", str(tmp_path / "d.npy")]) == 0
    got = np.load(tmp_path / "d.npy")
    assert got.dtype == np.float64 and np.array_equal(bits(got), bits(want))
    # raw A (uint64 patterns) with --shape, raw float64 D
    assert main(["mma", "matmul", str(tmp_path / "a.bin"), str(tmp_path / "b.npy"), str(tmp_path / "c.npy"),
                 "--shape", "5,3,7", "--unit", "sm80_mma_fp64", "--a-format", "fp64", "--b-format", "fp64",
                 "-o", str(tmp_path / "d.f64")]) == 0
    raw = np.frombuffer((tmp_path / "d.f64").read_bytes(), "<f8").reshape(5, 3)
    assert np.array_equal(bits(raw), bits(want))
    capsys.readouterr()
    # float64 values for an fp32 unit: refused, not narrowed
    assert main(["mma", "matmul", str(tmp_path / "a.npy"), str(tmp_path / "b.npy"), "--unit", "cdna1_mfma_fp32",
                 "--a-format", "fp32", "--b-format", "fp32", "-o", str(tmp_path / "x.npy")]) == 2
    assert "fmtsim: error: matmul: a must hold integer codes" in capsys.readouterr().err
    assert not (tmp_path / "x.npy").exists()


def _load(name):
    from fmtsim.conformance.vectors import _unpack_arrays

    meta = json.loads((VEC / "manifest.json").read_text())["files"][name]
    return meta, _unpack_arrays((VEC / name).read_bytes(), meta, name)


@pytest.mark.parametrize("unit", TIERED)
def test_gemm_vector_files(unit, tmp_path, capsys):
    """Each fma unit's file: d is the twin's (rows 0, 8, 12-15: ordinary, the largest, cancelling,
    any patterns), d within d_bound of d_exact for the unit (split-K, promotion too), and one ulp
    off fails ``fmtsim ver``."""
    from fmtsim.conformance.gemm_vectors import gemm_name

    fmt = UNITS[unit].formats[0]
    name = gemm_name(unit, fmt, fmt, None, None)
    meta, t = _load(name)
    assert meta["unit"]["family"] == "fma" and t["d"].dtype == UNITS[unit].out_dtype
    rows = [(i, j) for i in (0, 8, 9, 12, 13, 14, 15) for j in range(8)]
    slow = slow_matmul(t["a_codes"], t["b_codes"], t["c"], unit=unit, a_format=fmt, b_format=fmt, outputs=rows)
    for i, j in rows:
        assert bits(slow)[i, j] == bits(t["d"])[i, j], (i, j)
    bound, ref = t["d_bound"], t["d_exact"].astype(np.float64)
    assert np.isfinite(bound).sum() > 80
    for extra in ({}, {"split_k": 2}, {"promote_every": 16}):
        d = matmul(t["a_codes"], t["b_codes"], t["c"], unit=unit, a_format=fmt, b_format=fmt, **extra)
        with np.errstate(invalid="ignore"):
            ok = np.where(np.isnan(bound), _same(d, t["d_exact"]), np.isinf(bound) | (np.abs(d - ref) <= bound))
        assert ok.all(), (extra, np.argwhere(~ok)[:3])
    p = tmp_path / name
    raw = bytearray((VEC / name).read_bytes())
    p.write_bytes(bytes(raw))
    assert main(["ver", name, str(p), "--vectors", str(VEC)]) == 0
    w = t["d"].itemsize
    off = next(x["offset"] for x in meta["arrays"] if x["name"] == "d") + w * (0 * 8 + 1)
    v = int.from_bytes(raw[off:off + w], "little") + 1
    raw[off:off + w] = v.to_bytes(w, "little")
    p.write_bytes(bytes(raw))
    capsys.readouterr()
    assert main(["ver", name, str(p), "--vectors", str(VEC)]) == 1
    out = capsys.readouterr().out
    assert "D[0, 1]" in out and "1 ulp apart" in out


@pytest.mark.parametrize("unit", slow_unless(FMA_UNITS, keep={"cdna1_mfma_fp32"}))
def test_conform_mmasim_fma_instructions(unit):
    """The unit against one of its MMA-Sim instructions over every coverage model (all 27 run
    in the full tier's every-unit conformance test): 0 unexplained."""
    pytest.importorskip("torch", reason="torch is not installed (pip install 'fmtsim[mma]')")
    pytest.importorskip("mmasim", reason="mmasim is not installed (pip install 'fmtsim[mma]')")
    from fmtsim.conformance.impls import mmasim

    cfg = next(c for c in mmasim.CONFIGS if c.unit == unit)
    op = mmasim._instruction(cfg)
    rng = np.random.default_rng(5)
    cases = 0
    for name in mmasim.MODELS:
        if not mmasim.applies(name, cfg):
            continue
        case = mmasim._model(name, cfg, rng, 16, 8, 48)
        same, ours, theirs = mmasim.compare(cfg, case, op)
        assert ours.dtype == theirs.dtype == UNITS[unit].out_dtype
        covered = same.copy()
        for mask in mmasim.explain_mma(unit, ours, theirs, {"case": case, "cfg": cfg}).values():
            covered |= mask & np.isnan(ours)  # the only named divergence of the fma units: NaN payloads
        assert covered.all(), (name, ours[~covered][:4], theirs[~covered][:4])
        cases += same.size
    assert cases == 8 * 16 * 8


def test_a_wrong_fma_is_caught(monkeypatch):
    """The comparison can fail: an unfused multiply-add (the product rounded first) in place of
    the FMA disagrees with MMA-Sim on ordinary fp32 operands."""
    pytest.importorskip("torch", reason="torch is not installed (pip install 'fmtsim[mma]')")
    pytest.importorskip("mmasim", reason="mmasim is not installed (pip install 'fmtsim[mma]')")
    from fmtsim.conformance.impls import mmasim

    cfg = next(c for c in mmasim.CONFIGS if c.unit == "cdna1_mfma_fp32")
    case = mmasim._model("cancellation", cfg, np.random.default_rng(2), 16, 8, 16)
    assert mmasim.compare(cfg, case)[0].all()

    def unfused(a, b, c):
        with np.errstate(all="ignore"):
            p = np.asarray(a, np.float32) * np.asarray(b, np.float32)
            return (p + np.asarray(c, np.float32)).astype(np.float32)
    from fmtsim.mma import gemm

    monkeypatch.setattr(gemm, "uses_compiled", lambda unit, engine: False)  # the numpy chain, which calls fma
    monkeypatch.setattr(fma_mod, "fma", unfused)
    assert not mmasim.compare(cfg, case)[0].all()
