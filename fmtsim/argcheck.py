"""Argument checks shared by the block-scheme and layout modules (mx, nvfp4, intq,
layout, block, schemes, fnuz): each refuses a bad argument with a TypeError or
ValueError whose message names the function, the argument and the problem, so that
nothing reaches numpy in a shape it would silently misread.

Conventions, the same everywhere:

- integer arguments take a Python int or a numpy integer; ``bool`` is refused (True
  is not a block size) and so is a float, even an integral one (numpy itself refuses
  ``np.zeros(3.0)``);
- flags take ``bool`` or ``numpy.bool_`` only;
- named choices take a ``str`` from the listed names;
- output dtypes for values are float16, bfloat16, float32 or float64 (as
  :func:`fmtsim.decode`), and a float64 result is rounded once to them
  (:func:`round_to_dtype`).
"""

from __future__ import annotations

import operator
import os
from collections.abc import Sequence
from typing import Any

import ml_dtypes
import numpy as np

from .arrays import as_numpy

__all__ = ["integer", "optional_integer", "flag", "choice", "float_dtype", "round_to_dtype", "where",
           "integer_array", "instance", "rounding_name", "path", "jobs", "cli_integer", "FLOAT_DTYPES"]

FLOAT_DTYPES = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16), np.dtype(np.float32), np.dtype(np.float64))


def where(shape: tuple[int, ...], flat_index: int) -> str:
    """'index 3' for 1-D arrays, 'index (1, 2)' otherwise."""
    if len(shape) <= 1:
        return f"index {flat_index}"
    return f"index {tuple(int(i) for i in np.unravel_index(flat_index, shape))}"


def integer(value: Any, name: str, *, low: int | None = None, high: int | None = None) -> int:
    """``value`` as an int, refusing bools, floats and anything else; ``low``/``high``
    bound it (inclusive)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        try:
            shown = repr(value)
        except Exception:  # pragma: no cover - a repr that fails is not ours to fix
            shown = "?"
        raise TypeError(f"{name} must be an integer, not {type(value).__name__} ({shown[:60]})")
    v = operator.index(value)
    if low is not None and high is not None and not low <= v <= high:
        raise ValueError(f"{name} must be {low}..{high}, not {v}")
    if low is not None and v < low:
        raise ValueError(f"{name} must be at least {low}, not {v}")
    if high is not None and v > high:
        raise ValueError(f"{name} must be at most {high}, not {v}")
    return v


def jobs(value: Any, name: str = "jobs") -> int:
    """A worker-process count: an int or numpy integer, at least 1 (the API and every ``--jobs``
    apply the same rule, so the CLI never accepts what the API refuses)."""
    return integer(value, name, low=1)


def cli_integer(option: str, *, low: int | None = None, high: int | None = None) -> Any:
    """An argparse ``type=`` for a whole-number option, bounded as :func:`integer`: ``--jobs 0`` or
    ``--block-size -32`` is refused at parse time, naming the option, instead of reaching a later
    check that blames another argument."""
    import argparse

    def parse(text: str) -> int:
        # argparse puts "argument --jobs:" before these, so they do not repeat the option
        try:
            v = int(text.strip(), 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"takes a whole number, not {text!r}") from None
        try:
            return integer(v, "it", low=low, high=high)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e).removeprefix("it ")) from None

    parse.__name__ = option.lstrip("-").replace("-", "_")
    return parse


def optional_integer(value: Any, name: str, *, low: int | None = None, high: int | None = None) -> int | None:
    return None if value is None else integer(value, name, low=low, high=high)


def flag(value: Any, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, not {type(value).__name__}")
    return bool(value)


def choice(value: Any, name: str, choices: Sequence[str]) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be one of {', '.join(map(repr, choices))}, not {type(value).__name__}")
    if value not in choices:
        raise ValueError(f"unknown {name} {value!r}; choose one of: {', '.join(choices)}")
    return value


def rounding_name(value: Any, name: str = "rounding") -> str | None:
    """None (the default mode) or a str; the name itself is checked where it is resolved."""
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{name} must be a rounding mode name such as 'rne', not {type(value).__name__}")
    return value


def float_dtype(dtype: Any, name: str = "dtype") -> np.dtype:
    """float16, bfloat16, float32 or float64; integer and other dtypes raise TypeError
    (a cast to int32 would truncate values without a word)."""
    try:
        dt = np.dtype(dtype)
    except Exception:  # np.dtype(",") raises SyntaxError, np.dtype("f4,") ValueError, ...
        raise TypeError(f"{name} must be float16, bfloat16, float32 or float64, not {dtype!r}") from None
    if dt not in FLOAT_DTYPES:
        raise TypeError(f"{name} must be float16, bfloat16, float32 or float64, not {dt}")
    return dt


def round_to_dtype(x: np.ndarray, dt: np.dtype) -> np.ndarray:
    """float64 ``x`` rounded once (to nearest, ties to even) into ``dt``.

    numpy rounds float64 directly into float16 and float32; ml_dtypes' float64 ->
    bfloat16 cast goes through float32 and can round twice (1 + 2^-8 + 2^-30 becomes
    1.0, not 1 + 2^-7). So bfloat16 goes through float32 *rounded to odd*, which has
    more than two bits beyond bfloat16's and so rounds once overall.
    """
    x = np.asarray(x, dtype=np.float64)
    if dt != np.dtype(ml_dtypes.bfloat16):
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            return x.astype(dt)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        f = x.astype(np.float32)
        back = f.astype(np.float64)
        inexact = np.isfinite(x) & (back != x)
        # truncate toward zero, then make the last bit 1 (sticky): round to odd
        away = inexact & (np.abs(back) > np.abs(x))
        f = np.where(away, np.nextafter(f, np.float32(0)), f)
        bits = f.view(np.uint32) | inexact.astype(np.uint32)
        return bits.view(np.float32).astype(dt)


def integer_array(a: Any, name: str, *, bits: int | None = None) -> np.ndarray:
    """An integer array (bool refused); with ``bits``, every value in 0 .. 2^bits - 1."""
    arr = as_numpy(a, name)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{name} must be an integer array, not {arr.dtype}")
    if bits is not None and arr.size:
        bad = (arr < 0) | (arr >= (1 << bits))
        if bad.any():
            i = int(np.argmax(bad.reshape(-1)))
            raise ValueError(f"{name}: value {arr.reshape(-1)[i]} at {where(arr.shape, i)} does not fit in "
                             f"{bits} bits")
    return arr


def instance(obj: Any, cls: type, name: str, hint: str) -> None:
    if not isinstance(obj, cls):
        article = "an" if cls.__name__[0] in "AEFHILMNORSX" else "a"
        raise TypeError(f"{name} must be {article} {cls.__name__} ({hint}), not {type(obj).__name__}")


def path(value: Any, name: str, *, optional: bool = False) -> None:
    """TypeError naming ``name`` unless ``value`` is a path: a str or an os.PathLike (such as
    pathlib.Path) whose fspath is a str (None too where ``optional``). The value is left as given:
    a trailing separator, which Path() drops, can mean "a directory"."""
    if optional and value is None:
        return
    if isinstance(value, str) or (isinstance(value, os.PathLike) and isinstance(os.fspath(value), str)):
        return
    raise TypeError(f"{name} must be a path (a str or an os.PathLike such as pathlib.Path), not "
                    f"{type(value).__name__}")
