"""Array intake: what fmtsim accepts as an array, and the one place foreign tensors become numpy.

Accepted: anything ``np.asarray`` turns into a numeric array (lists, scalars, numpy arrays of any
strides), and PyTorch CPU tensors, read without a copy where the layout allows and without torch
becoming a dependency (the tensor is recognised by its type's module, never by importing torch).
torch dtypes numpy lacks (bfloat16, the float8 types, float8_e8m0fnu) are reinterpreted bit for bit
as the matching ml_dtypes type, so no value passes through another float type. Results are always
numpy arrays.

Arrays in the other byte order (``>f4`` on a little-endian machine) are read value for value,
converted to native order as numpy's arithmetic does.

fmtsim's answers assume IEEE arithmetic with subnormals (every fast path scales, decodes and
rounds with float32/float64 operations), so the intake also refuses to run while the calling
thread's CPU flushes subnormals to zero (x86 FTZ/DAZ, as ``torch.set_flush_denormal(True)``
sets them): a RuntimeError says so, instead of answers that are silently wrong.

Refused with a message: tensors on another device (CUDA, MPS, meta: move them with ``.cpu()``),
numpy masked arrays (their mask would be silently dropped: pass ``x.filled(v)`` or
``x.compressed()``), and tensor types fmtsim does not know.
"""

from __future__ import annotations

import re
from typing import Any

import ml_dtypes
import numpy as np

__all__ = ["as_numpy", "check_subnormal_arithmetic"]

# torch dtype name -> (integer view dtype name, numpy dtype) for the types numpy cannot hold
_TORCH_REINTERPRET = {
    "bfloat16": ("int16", np.dtype(ml_dtypes.bfloat16)),
    "float8_e4m3fn": ("uint8", np.dtype(ml_dtypes.float8_e4m3fn)),
    "float8_e5m2": ("uint8", np.dtype(ml_dtypes.float8_e5m2)),
    "float8_e4m3fnuz": ("uint8", np.dtype(ml_dtypes.float8_e4m3fnuz)),
    "float8_e5m2fnuz": ("uint8", np.dtype(ml_dtypes.float8_e5m2fnuz)),
    "float8_e8m0fnu": ("uint8", np.dtype(ml_dtypes.float8_e8m0fnu)),
}


def _is_torch_tensor(x: Any) -> bool:
    return any(c.__module__.startswith("torch") and c.__name__ in ("Tensor", "Parameter")
               for c in type(x).__mro__)


def _torch_to_numpy(t: Any, what: str) -> np.ndarray:
    device = str(t.device)
    if device != "cpu":
        raise TypeError(f"{what}: a torch tensor on device '{device}'; fmtsim works on CPU arrays: "
                        f"pass {what}.cpu() (or .detach().cpu())")
    if t.is_sparse or getattr(t, "is_quantized", False):
        raise TypeError(f"{what}: sparse and quantized torch tensors are not accepted; pass .to_dense() "
                        "or the integer representation")
    t = t.detach()
    if t.is_conj():
        t = t.resolve_conj()
    name = str(t.dtype).removeprefix("torch.")
    if name in _TORCH_REINTERPRET:
        view_name, np_dtype = _TORCH_REINTERPRET[name]
        import torch  # only reached with a torch tensor in hand, so torch is installed

        return np.asarray(t.view(getattr(torch, view_name)).numpy()).view(np_dtype)
    if re.match(r"(float4_|float6_|bits|u?int[1-7]$)", name):
        raise TypeError(f"{what}: torch dtype {t.dtype} packs sub-byte values; pass its codes as a uint8 "
                        f"tensor (e.g. {what}.view(torch.uint8)) and unpack them with fmtsim.layout")
    try:
        return np.asarray(t.numpy())
    except (TypeError, RuntimeError) as e:
        raise TypeError(f"{what}: torch tensor of dtype {t.dtype} cannot be read as a numpy array ({e})") from None


_TINY32, _ONE32 = np.float32(2.0**-149), np.float32(1.0)
_TINY64, _ONE64 = np.float64(2.0**-1074), np.float64(1.0)


def check_subnormal_arithmetic() -> None:
    """RuntimeError when this thread's float arithmetic flushes subnormals (inputs read as zero,
    or results written as zero): the smallest subnormal times one must stay itself."""
    if _TINY32 * _ONE32 == 0 or _TINY64 * _ONE64 == 0:
        raise RuntimeError("this thread's CPU flushes subnormal numbers to zero (FTZ/DAZ, as "
                           "torch.set_flush_denormal(True) or a library built with -ffast-math sets), so "
                           "fmtsim's answers would not be exact; turn it off first "
                           "(torch.set_flush_denormal(False))")


def as_numpy(x: Any, what: str = "x") -> np.ndarray:
    """``x`` as a numpy array, or TypeError naming ``what`` and the problem (see the module
    docstring); RuntimeError where the CPU flushes subnormals (:func:`check_subnormal_arithmetic`)."""
    check_subnormal_arithmetic()
    if isinstance(x, np.ma.MaskedArray):
        raise TypeError(f"{what}: masked arrays are not accepted (the mask would be ignored); pass "
                        f"{what}.filled(value) or {what}.compressed()")
    if _is_torch_tensor(x):
        return _torch_to_numpy(x, what)
    if isinstance(x, np.ndarray):
        return _native(x)
    if hasattr(x, "__cuda_array_interface__") and not hasattr(x, "__array__"):
        raise TypeError(f"{what}: a GPU array ({type(x).__name__}); copy it to the host first")
    try:
        arr = np.asarray(x)
    except (ValueError, TypeError) as e:
        raise TypeError(f"{what}: cannot be read as an array ({e})") from None
    return _native(arr)


def _native(arr: np.ndarray) -> np.ndarray:
    """A byte-swapped array (``>f4`` on x86, read from a file or a network buffer) in native byte
    order, value for value, as numpy's own arithmetic reads it; native arrays pass unchanged."""
    if arr.dtype.isnative or arr.dtype.fields is not None:
        return arr
    return arr.astype(arr.dtype.newbyteorder("="))
