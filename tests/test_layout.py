"""Memory layouts: hand-computed positions, not only round trips."""

import numpy as np
import pytest

from fmtsim import layout, mx


def test_fp4_nibble_orders():
    c = np.array([[1, 2, 3, 4]], np.uint8)
    assert layout.pack_fp4(c).tolist() == [[0x21, 0x43]]
    assert layout.pack_fp4(c, order="high_first").tolist() == [[0x12, 0x34]]
    assert np.array_equal(layout.unpack_fp4(layout.pack_fp4(c)), c)
    assert np.array_equal(layout.unpack_fp4(layout.pack_fp4(c, order="high_first"), order="high_first"), c)
    with pytest.raises(ValueError, match="length 3, not a multiple of 2"):
        layout.pack_fp4(np.array([1, 2, 3]))
    assert layout.pack_fp4(np.array([1, 2, 3]), pad=True).tolist() == [0x21, 0x03]
    assert layout.unpack_fp4(np.array([0x21, 0x03], np.uint8), length=3).tolist() == [1, 2, 3]
    with pytest.raises(ValueError, match="does not fit in 4 bits"):
        layout.pack_fp4(np.array([16, 0]))


def test_fp6_dense_bit_order():
    # w = 1 | 2 << 6 | 3 << 12 | 4 << 18 = 0x103081, least significant byte first
    assert layout.pack_fp6(np.array([1, 2, 3, 4])).tolist() == [0x81, 0x30, 0x10]
    assert layout.pack_fp6(np.array([63, 0, 0, 0])).tolist() == [0x3F, 0, 0]
    assert layout.pack_fp6(np.array([0, 0, 0, 63])).tolist() == [0, 0, 0xFC]
    rng = np.random.default_rng(0)
    c = rng.integers(0, 64, (3, 20), dtype=np.uint8)
    assert np.array_equal(layout.unpack_fp6(layout.pack_fp6(c)), c)
    assert np.array_equal(layout.pack_fp6(c, dense=False), c)
    with pytest.raises(ValueError, match="top two bits"):
        layout.unpack_fp6(np.array([64], np.uint8), dense=False)
    with pytest.raises(ValueError, match="not a multiple of 4"):
        layout.pack_fp6(np.arange(5))


@pytest.mark.parametrize("r,c,offset", [
    (0, 0, 0), (1, 0, 16), (32, 0, 4), (33, 3, 23), (127, 2, 510),
    (0, 4, 512), (128, 0, 1024), (130, 5, 1569), (255, 7, 1536 + 511),
])
def test_swizzle_positions_by_hand(r, c, offset):
    s = np.zeros((256, 8), np.uint8)
    s[r, c] = 0xAB
    sw = layout.swizzle_scales(s)
    assert sw.size == 2048
    assert sw[offset] == 0xAB and np.count_nonzero(sw) == 1


def test_swizzle_padding_and_inverse():
    rng = np.random.default_rng(1)
    s = rng.integers(1, 255, (130, 5), dtype=np.uint8)
    sw = layout.swizzle_scales(s)
    assert sw.size == 256 * 8  # padded to 256 rows and 8 columns
    assert np.count_nonzero(sw) == s.size  # the padding is zeros
    assert np.array_equal(layout.unswizzle_scales(sw, 130, 5), s)
    with pytest.raises(ValueError, match="swizzles to"):
        layout.unswizzle_scales(sw[:-1], 130, 5)


def test_unswizzle_order_reads_what_unswizzle_scales_reads():
    # the index form (for decoded scale values) picks the same bytes as the byte form
    rng = np.random.default_rng(2)
    s = rng.integers(0, 256, (130, 5), dtype=np.uint8)
    sw = layout.swizzle_scales(s)
    order = layout.unswizzle_order(130, 5)
    assert order.shape == (130, 5)
    assert np.array_equal(sw[order], layout.unswizzle_scales(sw, 130, 5))
    assert np.array_equal(sw[order], s)


def test_gpt_oss_round_trip(tmp_path):
    pytest.importorskip("safetensors", reason="needs safetensors")
    from safetensors.numpy import save_file

    from fmtsim.checkpoint import load

    x = np.random.default_rng(2).standard_normal((2, 8, 64)).astype(np.float32)
    q = mx.quantize(x, "mxfp4")
    blocks, scales = layout.to_gpt_oss(q)
    assert blocks.shape == (2, 8, 2, 16) and scales.shape == (2, 8, 2)
    assert blocks[0, 0, 0, 0] == (q.codes[0, 0, 0] | q.codes[0, 0, 1] << 4)
    path = tmp_path / "experts.safetensors"
    save_file({"block.0.mlp.mlp1_weight.blocks": blocks, "block.0.mlp.mlp1_weight.scales": scales}, str(path))
    t = load(path)
    back = layout.from_gpt_oss(t["block.0.mlp.mlp1_weight.blocks"], t["block.0.mlp.mlp1_weight.scales"])
    assert np.array_equal(back.codes, q.codes) and np.array_equal(back.scales, q.scales)
    assert np.array_equal(mx.dequantize(back), mx.dequantize(q))
    with pytest.raises(ValueError, match="disagree"):
        layout.from_gpt_oss(blocks, scales[..., :1])
