"""fmtsim.compare against the seed post's worked INT4 examples (printed digits) and the
quantizers it wraps."""

import numpy as np
import pytest

import fmtsim
from fmtsim.compare import compare, parse_scheme, quantize_dequantize

SEED = [0.12, -0.53, 0.88, -0.07, 0.31, 1.40, -0.95, 0.02]


def test_seed_int4_per_tensor_and_groups():
    rows = {r["scheme"]: r for r in compare(np.array(SEED), ["int4", "int4:sym:group=4"])}
    assert f"{rows['int4']['mse']:.4f}" == "0.0042"
    assert f"{rows['int4:sym:group=4']['mse']:.5f}" == "0.00186"


def test_seed_outlier_zeroes_the_rest():
    w = np.array(SEED)
    w[5] = 14.0
    (row,) = compare(w, ["int4"])
    assert f"{row['mse']:.4f}" == "0.2592"
    assert row["zeroed"] == pytest.approx(7 / 8)


def test_wraps_fmtsim_quantizers_bit_for_bit():
    rng = np.random.default_rng(1)
    w = rng.standard_normal((32, 64)).astype(np.float32)
    got, bpw = quantize_dequantize(w, "mxfp4:rule=ceil")
    want = fmtsim.mx.dequantize(fmtsim.mx.quantize(w, "mxfp4", scale_rule="ceil"), np.float64)
    assert np.array_equal(got.view(np.int64), want.view(np.int64))
    assert bpw == 4 + 8 / 32
    got, bpw = quantize_dequantize(w, "nvfp4:tile=16x16")
    want = fmtsim.nvfp4.dequantize(fmtsim.nvfp4.quantize(w, tile=(16, 16)), np.float64)
    assert np.array_equal(got.view(np.int64), want.view(np.int64))
    got, _ = quantize_dequantize(w, "int8:asym:channel")
    want = fmtsim.intq.dequantize(fmtsim.intq.quantize(w, 8, symmetric=False, channel_axis=0), np.float64)
    assert np.array_equal(got.view(np.int64), want.view(np.int64))


def test_bad_spec_names_the_part():
    with pytest.raises(ValueError, match="unknown option 'chanel'"):
        parse_scheme("int4:chanel")
    with pytest.raises(ValueError, match="'rule' does not apply to nvfp4"):
        parse_scheme("nvfp4:rule=floor")
