"""Result rows of ``fmtsim conform``: one :class:`Row` per (implementation, format, model).

This module sits below the runner and below every implementation module, so an
implementation never imports the runner (conformance.run) to report a result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Row", "mismatch", "input_text"]


@dataclass
class Row:
    impl: str
    fmt: str
    model: str
    cases: int = 0
    passed: int = 0
    known: dict[str, int] = field(default_factory=dict)
    failed: int = 0
    examples: list[str] = field(default_factory=list)

    def add(self, ok: np.ndarray, known: dict[str, np.ndarray], describe: Callable[[int], str]) -> None:
        """Count one batch: ``ok`` per case; ``known`` name -> mask of the cases a named
        divergence covers (a failed case inside one is counted under its name)."""
        self.cases += ok.size
        self.passed += int(ok.sum())
        covered = np.zeros(ok.shape, bool)
        for name, mask in known.items():
            hit = ~ok & mask
            if hit.any():
                self.known[name] = self.known.get(name, 0) + int(hit.sum())
            covered |= mask
        bad = np.nonzero(~ok & ~covered)[0]
        self.failed += bad.size
        for i in bad[: max(0, 3 - len(self.examples))]:
            self.examples.append(describe(int(i)))

    def fail_all(self, n: int, why: str) -> None:
        """``n`` cases that could not be compared (the implementation raised, or returned
        the wrong number of results): all failed, with the reason as the example."""
        self.cases += n
        self.failed += n
        self.examples.append(why)


def mismatch(src: str, x: np.ndarray, a: np.ndarray, a_name: str, b: np.ndarray, b_name: str
             ) -> Callable[[int], str]:
    """A describer for :meth:`Row.add`: the input and both codes of case ``i``."""
    def describe(i: int) -> str:
        return f"{src} {input_text(x[i])}: {a_name} {int(a[i]):#x}, {b_name} {int(b[i]):#x}"
    return describe


def input_text(v: Any) -> str:
    """One input as its value and its bits, sign included (a NaN's sign and payload are in the bits):
    '-nan (0xffc00000)', '0.1 (0x3dcccccd)'."""
    v = np.asarray(v)
    bits = int(v.reshape(1).view(f"u{v.dtype.itemsize}")[0])
    f = float(v)
    value = ("-nan" if np.signbit(v) else "nan") if f != f else repr(f)
    return f"{value} ({bits:#0{2 + 2 * v.dtype.itemsize}x})"
