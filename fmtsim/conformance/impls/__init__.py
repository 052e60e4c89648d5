"""The registry of implementations ``fmtsim conform`` can run.

Every module in this package defines ``IMPLEMENTATIONS``, a list of
:class:`~fmtsim.conformance.plugin.Implementation` objects; installed packages add their own
under the ``fmtsim.implementations`` entry-point group (each entry point names such a list
or a single object). Adding an implementation is adding one module: nothing else names it.
The registry is built on first use, in module-name order (entry points after).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import pkgutil
from typing import Any

from ..plugin import Implementation

__all__ = ["registry", "get_implementation", "DEFAULT_IMPLEMENTATIONS"]

ENTRY_POINT_GROUP = "fmtsim.implementations"
DEFAULT_IMPLEMENTATIONS = ("fmtsim", "ml_dtypes")  # what ``fmtsim conform`` runs when none is named

_REGISTRY: dict[str, Implementation] = {}
_ALIASES: dict[str, str] = {}


def _add(obj: Any, where: str) -> None:
    items = obj if isinstance(obj, (list, tuple)) else [obj]
    for impl in items:
        if not isinstance(impl, Implementation) or not impl.name:
            raise TypeError(f"{where}: IMPLEMENTATIONS must hold named Implementation objects, got {impl!r}")
        if impl.name in _REGISTRY or impl.name in _ALIASES:
            raise ValueError(f"{where}: implementation name {impl.name!r} is already registered")
        _REGISTRY[impl.name] = impl
        for alias in impl.aliases:
            _ALIASES[alias] = impl.name


def registry() -> dict[str, Implementation]:
    """name -> implementation, every one known here (installed or not: ask ``missing()``)."""
    if not _REGISTRY:
        for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
            module = importlib.import_module(f"{__name__}.{info.name}")
            _add(getattr(module, "IMPLEMENTATIONS", []), module.__name__)
        for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            _add(ep.load(), f"entry point {ep.name}")
    return _REGISTRY


def get_implementation(name: str) -> Implementation:
    """The implementation called ``name`` (or one of its aliases); ValueError listing the names."""
    reg = registry()
    key = _ALIASES.get(name, name)
    if key not in reg:
        raise ValueError(f"unknown implementation {name!r}; choose from {', '.join(reg)} "
                         "or name an adapter as module:function")
    return reg[key]
