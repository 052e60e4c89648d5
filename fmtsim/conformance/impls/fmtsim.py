"""``fmtsim``: fmtsim's own table-driven fast paths against its exact rational oracle.

decode_all (every code of every format, float64, against :func:`fmtsim.oracle.value_of`) and
encode_ties (the boundary model of every source dtype, rne under satfinite and nonsat, or
under one profile's policy with ``--profile``, against :func:`fmtsim.oracle.encode_one`);
and every committed golden vector, under the policy its file names. Must be 100 %.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...codec import decode, encode
from ...formats import get_format
from ...oracle import encode_one, value_of
from ...policy import resolve
from ..adapters import Adapter
from ..models import iter_models
from ..plugin import Implementation, Request
from ..rows import Row, mismatch


def _decode_all(name: str) -> Row:
    f = get_format(name)
    row = Row("fmtsim", name, "decode_all")
    codes = np.arange(f.n_codes)
    got = decode(codes, name, np.float64)
    want = [value_of(int(c), f) for c in codes]
    ok = np.array([
        np.isnan(g) if w == "nan" else (g == float(w) if not isinstance(w, str) else
                                         g == (np.inf if w == "+inf" else -np.inf))
        for g, w in zip(got, want, strict=True)
    ])
    row.add(ok, {}, lambda i: f"code {i:#x}: got {got[i]!r}, oracle {want[i]}")
    return row


def _encode_ties(name: str, profile: str | None = None) -> Row:
    """Fast path vs oracle: rne under both overflow policies, or one profile's policy."""
    f = get_format(name)
    row = Row("fmtsim" if profile is None else f"fmtsim[{profile}]", name, "encode_ties")
    if profile is None:
        policies = [resolve(name, "rne", ov, None if f.has_nan else "zero")
                    for ov in (("satfinite", "nonsat") if (f.has_inf or f.has_nan) else ("satfinite",))]
    else:
        policies = [resolve(name, profile=profile)]
    for _model, src, x in iter_models(name, big=False):
        for pol in policies:
            xs = x
            if pol.on_nan.mode == "raise":
                with np.errstate(invalid="ignore"):
                    xs = x[~np.isnan(x.astype(np.float64))]
            wide = xs.astype(np.float64)
            # a profile's finer fields (per-sign NaN codes, E8M0 specials ...) ride on the profile
            got = (encode(xs, name, profile=profile) if profile is not None else
                   encode(xs, name, rounding=pol.rounding, overflow=pol.on_overflow.mode, nan=pol.on_nan.mode))
            want = np.array([
                encode_one(float(v), name, src=src, policy=pol,
                           negative_nan=bool(np.signbit(v)))[0]
                for v in wide
            ], dtype=np.uint8)
            row.add(got == want, {}, mismatch(src, xs, got, "fmtsim", want, "oracle"))
    return row


class Fmtsim(Implementation):
    name = "fmtsim"
    summary = "fmtsim's table-driven fast paths against its exact rational (Fraction) oracle"
    capabilities = ("oracle", "vectors")
    profiles = ("ocp",)

    def version(self) -> str:
        import importlib.metadata

        return f"fmtsim {importlib.metadata.version('fmtsim')}"

    def oracle_rows(self, req: Request) -> list[Row]:
        rows = []
        for name in req.names:
            rows.append(_decode_all(name))
            rows.append(_encode_ties(name, req.profile))
        return rows

    def vector_encoder(self, meta: dict[str, Any], src: str
                       ) -> tuple[Callable[[np.ndarray, np.ndarray | None], Any], Adapter | None] | None:
        fmt = meta["format"]["name"]

        def run_it(x: np.ndarray, rbits: np.ndarray | None) -> Any:
            return encode(x, fmt, rounding=meta["rounding"], overflow=meta["overflow"], nan=meta["nan"],
                          rbits=rbits)
        return run_it, None


IMPLEMENTATIONS = [Fmtsim()]
