"""fmtsim: a bit-exact reference for low-precision number formats.

Public API (see README.md and ../DESIGN contract): FORMATS, get_format,
encode, decode, quantize, encode_with_flags, and the submodules for block
scaling, layouts and OCP<->FNUZ conversion.
"""

from .codec import decode, encode, encode_with_flags, quantize
from .formats import FORMATS, Format, get_format
from .policy import NAN_MODES, OVERFLOW_MODES, PROFILES, ROUNDING_MODES

__version__ = "0.1.0"

__all__ = [
    "FORMATS",
    "Format",
    "get_format",
    "encode",
    "decode",
    "quantize",
    "encode_with_flags",
    "ROUNDING_MODES",
    "OVERFLOW_MODES",
    "NAN_MODES",
    "PROFILES",
    "__version__",
]
