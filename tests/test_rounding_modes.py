"""The rounding modes beyond IEEE 754's five: ties toward zero (rnz), ties toward -Inf (rnm) and +Inf (rnp), round
to odd (rto), and the stochastic rules with a chosen number of random bits. Expected codes are worked
out by hand from the definitions (IEEE P3109 interim report v4.0, 4.7.4 and 4.7.5, for ToOdd and
StochasticA/B/C) on E4M3/E5M2 values from OFP8's tables; fast path and Fraction twin are held
equal on every mode in tests/test_exact.py and here on the tricky points."""

import numpy as np
import pytest

import fmtsim
from fmtsim.oracle import encode_one
from fmtsim.policy import Policy

# E4M3: 1.0 = 0x38, 1.125 = 0x39, 1.25 = 0x3A; max 448 = 0x7E (an even code); E5M2 max 57344 = 0x7B (odd)
TIE_EVEN_BELOW = 1.0625  # between 0x38 (even) and 0x39
TIE_ODD_BELOW = 1.1875  # between 0x39 (odd) and 0x3A


@pytest.mark.parametrize("mode, want", [
    ("rne", [0x38, 0x3A, 0xB8, 0xBA]),
    ("rna", [0x39, 0x3A, 0xB9, 0xBA]),
    ("rnz", [0x38, 0x39, 0xB8, 0xB9]),
    ("rnm", [0x38, 0x39, 0xB9, 0xBA]),  # a positive tie goes down, a negative one away from zero
    ("rnp", [0x39, 0x3A, 0xB8, 0xB9]),  # a positive tie goes away from zero, a negative one toward it
])
def test_ties(mode, want):
    x = np.float32([TIE_EVEN_BELOW, TIE_ODD_BELOW, -TIE_EVEN_BELOW, -TIE_ODD_BELOW])
    assert fmtsim.encode(x, "e4m3", rounding=mode).tolist() == want
    assert [encode_one(float(v), "e4m3", mode)[0] for v in x] == want


def test_round_to_odd():
    x = np.float32([1.0, 1.01, 1.13, 1.2, -1.01, 0.0009765625 * 1.5])
    # exact stays; inexact goes to the odd neighbour: 0x39 either side of it; 2^-10 * 1.5 lies between the
    # subnormals 2^-10 (0x01, odd) and 2^-9 (0x02): 0x01
    assert fmtsim.encode(x, "e4m3", rounding="rto").tolist() == [0x38, 0x39, 0x39, 0x39, 0xB9, 0x01]
    # past max finite: E4M3's max code 0x7E is even, so rto overflows (NaN without saturation);
    # E5M2's 0x7B is odd, so rto stays there (as P3109 4.7.5 says for formats whose max code is odd)
    assert fmtsim.encode(np.float32([460, -460]), "e4m3", rounding="rto", overflow="nonsat").tolist() == [0x7F, 0xFF]
    assert fmtsim.encode(np.float32([460]), "e4m3", rounding="rto").tolist() == [0x7E]
    codes, flags = fmtsim.encode_with_flags(np.float32([60000, 70000]), "e5m2", rounding="rto", overflow="nonsat")
    assert codes.tolist() == [0x7B, 0x7B]
    # 60000 rounds to max on the unbounded grid (inexact only); 70000 is past the next value 2^16: overflow
    assert flags.tolist() == [1, 1 | 4 | 32]


# v = 1 + f/8 in E4M3 (neighbours 1.0 and 1.125); N = 4 random bits: the smallest R that rounds up
@pytest.mark.parametrize("f, rule, threshold", [
    (11 / 32, "truncated", 11),  # floor(5.5) = 5: 5 + R >= 16
    (11 / 32, "offset", 10),  # floor(11) + 2R + 1 >= 32
    (11 / 32, "nearest", 10),  # RNITE(5.5) = 6
    (13 / 32, "truncated", 10),  # floor(6.5) = 6
    (13 / 32, "offset", 9),  # 13 + 2R + 1 >= 32
    (13 / 32, "nearest", 10),  # RNITE(6.5) = 6 (ties to even)
])
def test_stochastic_rules_with_four_bits(f, rule, threshold):
    x = np.full(16, 1 + f / 8, dtype=np.float32)
    r = np.arange(16, dtype=np.uint32)
    pol = Policy(rounding="sr", sr_rule=rule, sr_bits=4)
    want = [0x39 if k >= threshold else 0x38 for k in range(16)]
    assert fmtsim.encode(x, "e4m3", profile=pol, rbits=r).tolist() == want
    assert [encode_one(float(x[0]), "e4m3", rbits=k, profile=pol)[0] for k in range(16)] == want


def test_stochastic_equal_probabilities():
    x = np.float32([1.0 + 1 / 64, 1.0 + 1 / 64, 1.0 + 7 / 64, 1.0 + 7 / 64, 1.0, 1.0])
    r = np.uint32([0, 1, 0, 1, 0, 1])
    got = fmtsim.encode(x, "e4m3", profile=Policy(rounding="sr", sr_rule="equal"), rbits=r)
    assert got.tolist() == [0x38, 0x39, 0x38, 0x39, 0x38, 0x38]  # up on odd R, whatever the distance; exact stays


def test_stochastic_policy_is_checked():
    with pytest.raises(ValueError, match="sr_bits must be 1..32"):
        fmtsim.encode(np.float32([1]), "e4m3", profile=Policy(rounding="sr", sr_bits=0), rbits=np.uint32([0]))
    with pytest.raises(ValueError, match=r"rbits must be below 2\^4; index 1 holds 16"):
        fmtsim.encode(np.float32([1, 1]), "e4m3", profile=Policy(rounding="sr", sr_bits=4), rbits=np.uint32([3, 16]))
    with pytest.raises(ValueError, match="describe rounding='sr'"):
        fmtsim.encode(np.float32([1]), "e4m3", profile=Policy(rounding="rne", sr_rule="equal"))
    with pytest.raises(ValueError, match="unknown sr_rule"):
        fmtsim.encode(np.float32([1]), "e4m3", profile=Policy(rounding="sr", sr_rule="fair"), rbits=np.uint32([0]))


@pytest.mark.parametrize("mode", ["rnz", "rnm", "rnp", "rto"])
def test_new_modes_from_the_command_line(mode, capsys):
    from fmtsim.cli import main

    assert main(["encode", "e4m3", "1.1875", "--rounding", mode]) == 0
    assert "0x39" in capsys.readouterr().out  # 1.1875: the tie's lower neighbour, and the odd one


def test_rnp_on_the_subnormal_ties_and_past_max():
    # E4M3's smallest subnormal 2^-9 = 0x01: the tie at 2^-10 goes up for +, to -0 for -; the tie at
    # 1.5 * 2^-9 to 0x02 for + and to 0x81 for -. 464 (the tie past max 448) goes up to NaN without
    # saturation for +, and for - toward zero, to -448 (0xFE)
    x = np.float32([2.0**-10, -(2.0**-10), 1.5 * 2.0**-9, -1.5 * 2.0**-9, 464, -464])
    want = [0x01, 0x80, 0x02, 0x81, 0x7F, 0xFE]
    assert fmtsim.encode(x, "e4m3", rounding="rnp", overflow="nonsat").tolist() == want
    assert [encode_one(float(v), "e4m3", "rnp", "nonsat")[0] for v in x] == want
    codes, flags = fmtsim.encode_with_flags(x, "e4m3", rounding="rnp", overflow="nonsat")
    assert flags.tolist() == [encode_one(float(v), "e4m3", "rnp", "nonsat")[1] for v in x]
