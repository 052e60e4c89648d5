"""fmtsim: a bit-exact reference for low-precision number formats.

Public API (README.md): FORMATS, get_format, define_format / parse_format (user formats), encode, decode, quantize,
encode_with_flags, and the submodules mx, nvfp4, intq (block scaling), layout,
fnuz and checkpoint (OCP <-> FNUZ), schemes (effective bits), mma (matrix units),
bitpatterns (inputs and flags as the CLI prints and reads them).
"""

__version__ = "0.1.0"

from . import bitpatterns, checkpoint, fnuz, intq, layout, mma, mx, nvfp4, schemes  # noqa: E402
from .codec import decode, encode, encode_with_flags, quantize  # noqa: E402
from .formats import FORMATS, Format, define_format, get_format, parse_format  # noqa: E402
from .policy import NAN_MODES, OVERFLOW_MODES, PROFILES, ROUNDING_MODES  # noqa: E402

__all__ = [
    "FORMATS",
    "Format",
    "get_format",
    "define_format",
    "parse_format",
    "encode",
    "decode",
    "quantize",
    "encode_with_flags",
    "ROUNDING_MODES",
    "OVERFLOW_MODES",
    "NAN_MODES",
    "PROFILES",
    "__version__",
    "bitpatterns",
    "mx",
    "nvfp4",
    "intq",
    "layout",
    "fnuz",
    "checkpoint",
    "schemes",
    "mma",
]
