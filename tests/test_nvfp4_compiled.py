"""The compiled NVFP4 quantizer (fmtsim/mx_blocks.cpp, fmtsim_nvfp4_f32) against
nvfp4.quantize's numpy steps, bit for bit: both recipes, both tiles, every deterministic
rounding, a given or a computed global scale, all-zero tensors, a global scale that
underflows, zero, subnormal and huge blocks, -0.0, float16/bfloat16/float64 input, and the
engine argument. The numpy steps are held to TransformerEngine's and torchao's own
arithmetic by tests/test_block.py and tests/test_torch_peers.py (which run the kernel by
default)."""

import ml_dtypes
import numpy as np
import pytest

from fmtsim import nvfp4
from fmtsim.policy import ROUNDING_MODES

from .conftest import slow_unless

why = nvfp4._LIBRARY.unavailable_reason()
pytestmark = pytest.mark.skipif(why is not None, reason=f"the compiled block quantizer is unavailable: {why}")

DETERMINISTIC = [r for r in ROUNDING_MODES if r != "sr"]


def same(x, **kw):
    want = nvfp4.quantize(x, engine="numpy", **kw)
    got = nvfp4.quantize(x, engine="compiled", **kw)
    bad = np.nonzero(got.codes != want.codes)
    assert bad[0].size == 0, (kw, "codes differ at", [b[:5] for b in bad])
    bad = np.nonzero(got.scales != want.scales)
    assert bad[0].size == 0, (kw, "scales differ at", [b[:5] for b in bad])
    assert np.float32(got.global_scale).view(np.uint32) == np.float32(want.global_scale).view(np.uint32)
    assert (got.tile, got.recipe, got.shape) == (want.tile, want.recipe, want.shape)
    assert got.codes.dtype == want.codes.dtype == got.scales.dtype == np.uint8
    return got


def wide(rng, shape, lo=-40, hi=40):
    """float32 values over a wide range, a different range per block of 16, with zeros, -0.0
    and subnormals among them."""
    n = int(np.prod(shape))
    e = rng.integers(lo, hi, n // 16 + 1).repeat(16)[:n] + rng.integers(-6, 1, n)
    v = (rng.standard_normal(n) * np.exp2(e.astype(np.float64))).astype(np.float32)
    special = rng.random(n)
    v = np.where(special < 0.03, np.float32(0.0), v)
    v = np.where((special >= 0.03) & (special < 0.05), np.float32(-0.0), v)
    sub = rng.integers(1, 1 << 23, n).astype(np.uint32).view(np.float32)
    v = np.where((special >= 0.05) & (special < 0.06), sub, v)
    return v.reshape(shape)


@pytest.mark.parametrize("recipe", nvfp4.RECIPES)
@pytest.mark.parametrize("tile", [(1, 16), (16, 16)])
@pytest.mark.parametrize("rounding", slow_unless(DETERMINISTIC, ["rne", "rup"]))
def test_recipes_tiles_roundings(recipe, tile, rounding, rng):
    x = wide(rng, (64, 256))
    same(x, recipe=recipe, tile=tile, rounding=rounding)
    same(x, recipe=recipe, tile=tile, rounding=rounding, global_scale=0.37)


@pytest.mark.parametrize("recipe", nvfp4.RECIPES)
def test_small_large_and_zero_tensors(recipe, rng):
    """All zeros (te: encode scale FLT_MAX; torchao: G = 0 and NaN scales), a tensor whose
    global scale underflows (torchao: G = 0, an infinite reciprocal), blocks far below the
    global amax (te's subnormal scales, torchao's 2^-6 floor), values near float32's top,
    and global scales that make block multipliers overflow."""
    same(np.zeros((4, 32), np.float32), recipe=recipe)
    same(np.full((2, 16), np.float32(1e-45)), recipe=recipe)
    tiny = np.zeros((2, 32), np.float32)
    tiny[0, 3], tiny[1, 20] = np.float32(1e-45), np.float32(-3e-44)
    same(tiny, recipe=recipe)
    x = wide(rng, (16, 64), lo=-120, hi=120)
    x[0, 0] = np.float32(3.4e38)
    same(x, recipe=recipe)
    same(wide(rng, (8, 32)), recipe=recipe, global_scale=1e-30)
    same(wide(rng, (8, 32)), recipe=recipe, global_scale=3e36)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float64])
def test_other_inputs(dtype, rng):
    x = wide(rng, (16, 64), lo=-10, hi=10).astype(dtype)
    for recipe in nvfp4.RECIPES:
        same(x, recipe=recipe)


def test_large_array(rng):
    same(wide(rng, (512, 1024)), recipe="te")


def test_engine_argument(monkeypatch, rng):
    x = wide(rng, (2, 32))
    with pytest.raises(ValueError, match="engine must be one of auto, compiled, numpy, got 'fast'"):
        nvfp4.quantize(x, engine="fast")
    r = np.zeros(x.shape, np.uint32)
    with pytest.raises(ValueError, match="engine='compiled' takes every rounding but 'sr' \\(rounding is 'sr'"):
        nvfp4.quantize(x, rounding="sr", rbits=r, engine="compiled")
    # rbits without 'sr' is refused on every engine, not dropped by the kernel
    with pytest.raises(ValueError, match="rbits is only used with rounding='sr'"):
        nvfp4.quantize(x, rbits=r)
    monkeypatch.setenv("CXX", "/nonexistent/c++")
    nvfp4._LIBRARY.forget()
    try:
        with pytest.raises(ValueError, match="engine='compiled' is unavailable: .*no C\\+\\+ compiler"):
            nvfp4.quantize(x, engine="compiled")
        with pytest.warns(RuntimeWarning, match="runs the numpy path instead"):
            fallback = nvfp4.quantize(x)
        assert np.array_equal(fallback.codes, nvfp4.quantize(x, engine="numpy").codes)
    finally:
        nvfp4._LIBRARY.forget()


def test_torchao_reciprocal_then_divide_on_boundary_inputs():
    """torchao's multiplier is fl(fl(1/G) / s); fl(1 / fl(G s)) differs from it by an ulp for
    G = 85.65008, s = that of a block of amax 236.88683, and the three elements below then
    land on the other side of an E2M1 midpoint (found by search against both orders). The
    kernel must keep torchao's order."""
    f32 = lambda bits: np.array(bits, np.uint32).view(np.float32)  # noqa: E731
    g = f32(0x42AB4CD7)
    block = np.zeros((1, 16), np.float32)
    block[0, :4] = f32([0x436CE307, 0x4120980A, 0x41F0E40E, 0x4248BE0D])
    from fmtsim import decode, encode

    s = np.clip(np.float32(np.float32(block[0, 0] / np.float32(6)) / g), np.float32(2.0**-6), np.float32(448))
    sv = decode(encode(s, "e4m3"), "e4m3", np.float32)
    r_torchao, r_other = np.float32(np.float32(1) / g) / sv, np.float32(1) / np.float32(g * sv)
    assert r_torchao != r_other
    assert not np.array_equal(encode(block[0, 1:4] * r_torchao, "e2m1"), encode(block[0, 1:4] * r_other, "e2m1"))
    q = same(block, recipe="torchao", global_scale=g)
    assert np.array_equal(q.codes[0, 1:4], encode(block[0, 1:4] * r_torchao, "e2m1"))


@pytest.mark.parametrize("call", ["nvfp4", "mx", "matmul"])
def test_engine_of_the_wrong_type_is_a_type_error(call):
    from fmtsim import mma, mx

    x = np.zeros((1, 32), np.float32)
    fn = {"nvfp4": lambda e: nvfp4.quantize(x, engine=e), "mx": lambda e: mx.quantize(x, engine=e),
          "matmul": lambda e: mma.matmul(np.zeros((1, 32), np.uint8), np.zeros((32, 1), np.uint8),
                                         unit="sm90_wgmma_fp8", a_format="e4m3", b_format="e4m3", engine=e)}[call]
    for bad in (None, 1, True):
        with pytest.raises(TypeError, match="engine must be one of auto, compiled, numpy, not "):
            fn(bad)


@pytest.mark.parametrize("recipe", nvfp4.RECIPES)
@pytest.mark.parametrize("tile", [(1, 16), (16, 16)])
def test_layouts_and_global_scales_at_the_ends(recipe, tile, rng):
    """Inputs the kernel reads only after a copy (transposed, reversed, big-endian, 3-D, float64
    values that round to float32 subnormals or to float32's top, tensors of subnormals only,
    an all -0.0 block among nonzero ones) and global scales at both ends of the accepted range
    (the smallest whose float32 reciprocal is finite, the largest float32, a float32
    subnormal's neighbour 2^-126), every deterministic rounding on one of them."""
    x = wide(rng, (32, 32))
    x[16:, :16] = np.float32(-0.0)
    f64 = rng.standard_normal((32, 32)) * np.exp2(rng.integers(-160, -120, (32, 32)).astype(np.float64))
    f64[0, :16] = 3.4028235e38
    subs = (rng.integers(1, 1 << 23, (32, 32)).astype(np.uint32) | (rng.integers(0, 2, (32, 32)).astype(np.uint32)
                                                                      << 31)).view(np.float32)
    smallest = np.nextafter(np.float32(1) / np.float32(3.4028235e38), np.float32(1))  # 1/g finite, near FLT_MAX
    for data in (x.T, x[:, ::-1], x.astype(">f4"), x.reshape(2, 16, 32), f64, subs):
        for gs in (None, smallest, 2.0**-126, 3.4028235e38):
            same(data, recipe=recipe, tile=tile, global_scale=gs)
    for rounding in DETERMINISTIC:
        same(subs, recipe=recipe, tile=tile, rounding=rounding, global_scale=smallest)
