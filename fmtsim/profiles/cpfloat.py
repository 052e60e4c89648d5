"""``cpfloat``: CPFloat 0.6.0 (Fasi and Mikaitis; C, header-only), ``cpfloatf`` / ``cpfloat`` rounding
float and double arrays into a target format, through fmtsim's shim (conformance/impls/cpfloat.py).

CPFloat describes a target by its precision p (the significand's bits, the hidden one included)
and exponent range emin..emax, with options for subnormals, saturation and infinities. The formats
fmtsim holds it to, each with the options used (every other option is CPFloat's default):

    cpfloat_e4m3  the preset "q43" (E4M3): p 4, emin -6, emax 8; infinities off (overflow and Inf
                  give NaN), no saturation. emax 8 makes every exponent field finite: its values
                  are E4M3's bit patterns read with no NaN exponent, up to 480 (OCP E4M3: 448), and
                  beyond them a NaN: 257 values, more than a byte's codes. The record below has the
                  256 finite ones; what CPFloat sends to NaN has no code there (the named divergence
                  ``cpfloat.e4m3_overflow_nan_has_no_code``), and NaN inputs are left out.
    e5m2          the preset "q52": p 3, emin -14, emax 15, infinities on: OCP E5M2.
    e4m3ieee      custom p 4, emin -6, emax 7, infinities on: the IEEE-style E4M3 (max 240).
    e3m4          custom p 5, emin -2, emax 3, infinities on: the IEEE-style E3M4 (max 15.5).
    e2m1, e3m2,   custom p 2 / 3 / 4, emin 0 / -2 / 0, emax 2 / 4 / 2, saturation on: OCP's FP4/FP6
    e2m3          (without saturation an overflow would be an Inf these formats lack).

Rounding: CPFloat's round-to-nearest ties to even (``CPFLOAT_RND_NE``, the default), ties away
(``NA``), ties to zero (``NZ``), toward +Inf (``TP``), -Inf (``TN``), zero (``TZ``) and to odd
(``OD``) are fmtsim's rne, rna, rnz, rup, rdn, rtz and rto; each entry point names its mode
(``rounding=``) beside this profile. Under TP and TN an underflow's zero is written without its
sign: the input -0.0 gives +0, and under TP so does a negative that rounds to zero (profile
``cpfloat_directed``: ``neg_zero_input`` and ``neg_underflow`` 'positive'; IEEE 754 keeps -0).
Overflow follows IEEE 754 7.4 (a mode rounding toward the finite side gives ±max), ``nonsat`` where
the format has Inf, ``satfinite`` under saturation and for the q43 record; a NaN input is the
format's NaN with its sign (``nan='signed'``), where the format has one. The stochastic modes
(``SP``, ``SE``) draw from CPFloat's own generator and are not held (conformance/impls/cpfloat.py
says why).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..formats import Format
from ..policy import Policy
from . import Provenance, Variant

#: CPFloat's "q43" preset: E4M3's bit patterns with every exponent finite (max 480) and no NaN code
#: (CPFloat's NaN is a 257th value); it stands in for ``e4m3`` in ``--formats e4m3``
CPFLOAT_E4M3 = Format("cpfloat_e4m3", "float", 4, 3, 7, specials="none", aliases=("e4m3",),
                      title="CPFloat q43 preset: p 4, emin -6, emax 8, max 480 (NaN beyond the codes)",
                      source="CPFloat 0.6.0 cpfloat_populate_optstruct_from_format")
RECORDS = (CPFLOAT_E4M3,)


@dataclass(frozen=True)
class Target:
    """One target as CPFloat is asked for it: a preset name ("" for a custom format), precision,
    emin, emax, and the saturation / infinity options (1: on)."""

    preset: str
    precision: int
    emin: int
    emax: int
    saturation: int = 0
    infinity: int = 1


#: fmtsim's name of each format -> how CPFloat is asked for it (the module docstring)
TARGETS: dict[str, Target] = {
    "cpfloat_e4m3": Target("q43", 4, -6, 8, saturation=0, infinity=0),
    "e5m2": Target("q52", 3, -14, 15),
    "e4m3ieee": Target("", 4, -6, 7),
    "e3m4": Target("", 5, -2, 3),
    "e2m1": Target("", 2, 0, 2, saturation=1),
    "e3m2": Target("", 3, -2, 4, saturation=1),
    "e2m3": Target("", 4, 0, 2, saturation=1),
    # the 16-bit presets, as fmtsim user formats (uint16 codes). For a float array CPFloat rounds
    # bfloat16, a target with float's own exponent range, by other code (its *_SAME_EXP macros: under
    # TP and TN a zero keeps its sign, and a NaN is masked, not rounded); the conform implementation
    # holds those two modes from float sources to the plain ``cpfloat`` profile
    "e5m10b15_ieee": Target("h", 11, -14, 15),
    "e8m7b127_ieee": Target("b", 8, -126, 127),
}

#: CPFloat's deterministic rounding modes (its cpfloat_rounding_t values) -> fmtsim's
MODES: dict[str, int] = {"rne": 1, "rna": -1, "rnz": 0, "rup": 2, "rdn": 3, "rtz": 4, "rto": 7}


def _cpfloat(fmt: Format) -> Policy:
    if fmt.has_inf:
        return Policy("rne", "nonsat", "signed")
    return Policy("rne", "satfinite", "signed" if fmt.has_nan else "raise")


def _cpfloat_directed(fmt: Format) -> Policy:
    # TP/TN write an underflow's zero as +0: the input -0.0, and under TP a negative that rounds to zero
    return replace(_cpfloat(fmt), rounding="rup", neg_zero_input="positive", neg_underflow="positive")


VARIANTS = (
    Variant("cpfloat", Provenance("CPFloat cpfloatf/cpfloat through fmtsim's C shim (license.spdx 0.6.0, commit "
                                  "3583976)", version="0.6.0", date="2026-12-04"),
            otherwise=_cpfloat),
    Variant("cpfloat_directed", Provenance("CPFloat cpfloatf/cpfloat under CPFLOAT_RND_TP / CPFLOAT_RND_TN (0.6.0, "
                                           "commit 3583976)", version="0.6.0", date="2026-12-04"),
            otherwise=_cpfloat_directed),
)
