"""Result rows of ``fmtsim conform``: one :class:`Row` per (implementation, format, model).

This module sits below the runner and below every implementation module, so an
implementation never imports the runner (conformance.run) to report a result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..bitpatterns import array_pattern, flags_text, short_value

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
    # the unexpected failures with the rules that explain them (conformance.classify.RuleTally), or None
    rules: Any = None
    # "unverified version X (profile read off Y)" when the entry point's profile variant was not
    # read off the version run here: its failures are reported, and fail the run only under --strict
    unverified: str = ""

    def add(self, ok: np.ndarray, known: dict[str, np.ndarray], describe: Callable[[int], str],
            classify: Callable[[int], tuple[str, list[Any]]] | None = None) -> None:
        """Count one batch: ``ok`` per case; ``known`` name -> mask of the cases a named
        divergence covers (a failed case inside one is counted under its name). ``classify(i)``
        gives an unexpected failure's input text and the rules that explain it
        (conformance.classify.explain_encode), tallied in :attr:`rules`."""
        self.cases += ok.size
        self.passed += int(ok.sum())
        covered = np.zeros(ok.shape, bool)
        for name, mask in known.items():
            hit = ~ok & mask
            if hit.any():
                self.known[name] = self.known.get(name, 0) + int(hit.sum())
            covered |= mask
        bad = np.nonzero(~ok & ~covered)[0]
        if classify is not None and bad.size:
            if self.rules is None:
                from .classify import RuleTally

                self.rules = RuleTally()
            room = max(0, self.rules.limit - len(self.rules.items))
            for i in bad[:room]:
                self.rules.add(*classify(int(i)))
            self.rules.unclassified += max(0, bad.size - room)
        self.failed += bad.size
        for i in bad[: max(0, 3 - len(self.examples))]:
            self.examples.append(describe(int(i)))

    def fail_all(self, n: int, why: str) -> None:
        """``n`` cases that could not be compared (the implementation raised, or returned
        the wrong number of results): all failed, with the reason as the example."""
        self.cases += n
        self.failed += n
        self.examples.append(why)


_SOURCE_NAMES = {"float16", "bfloat16", "float32", "float64"}


def mismatch(src: str, x: np.ndarray, a: np.ndarray, a_name: str, b: np.ndarray, b_name: str,
             *, flags: bool = False) -> Callable[[int], str]:
    """A describer for :meth:`Row.add`: the input (as a bit pattern ``fmtsim encode`` reads back)
    and both results of case ``i``: codes in hex, or with ``flags`` the flags by name.
    ``src`` names where the inputs come from when it is not their type (a vector file's name)."""
    def result(v: int) -> str:
        return flags_text(v) if flags else f"{v:#x}"

    def describe(i: int) -> str:
        where = "" if src in _SOURCE_NAMES else f"{src} "
        return f"{where}{input_text(x[i])}: {a_name} {result(int(a[i]))}, {b_name} {result(int(b[i]))}"
    return describe


def input_text(v: Any) -> str:
    """One input as its bit pattern then its value (fmtsim.bitpatterns): 'f32:0xffc00000 (-nan)',
    'f32:0x3dcccccd (0.1)'; the pattern pastes into ``fmtsim encode`` as the same input."""
    return f"{array_pattern(v)} ({short_value(v)})"
