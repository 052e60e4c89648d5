"""Profiles as data: what each implementation does, one module per implementation.

A profile reproduces one real implementation (or a spec's rules). Its behaviour may depend
on the implementation's version and on the code path it takes (the CPU kernel its dispatcher
picks, a folder, a header's host path), so a profile is a list of :class:`Variant` records,
each a table from format to :class:`~fmtsim.policy.Policy` for a version range and a set of
code paths, with the :class:`Provenance` it was read off.

Every module of this package but those whose name starts with ``_`` defines ``VARIANTS``, a
tuple of variants; nothing else names an implementation. :data:`PROFILES` maps each profile
name (and alias) to its *default* variant, the first one its module declares for that name:
what ``encode(..., profile=name)`` uses. :func:`select` answers "which variant applies to
version V on code path P": a verified variant, or the nearest one, flagged unverified.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from ..formats import Format
from ..policy import Policy

__all__ = ["Provenance", "Variant", "Selection", "PROFILES", "VARIANTS", "select", "variants"]

#: a rule for one format: a policy, another profile's name (its default variant decides), or
#: a function of the format
Rule = Policy | str | Callable[[Format], Policy]


@dataclass(frozen=True)
class Provenance:
    """What a variant was read off: the run or the source that fixed every rule in it."""

    read_off: str  # what was run or read, e.g. "torch 2.13.0 Tensor.to (CPU)"
    version: str = ""  # the implementation's version it was checked on ("" for a spec)
    code_path: str = ""  # the CPU / ISA / kernel path it was checked on ("" where there is one)
    date: str = ""  # when (YYYY-MM-DD)

    def describe(self) -> str:
        parts = [f"{self.read_off} {self.version}" if self.version else self.read_off]
        if self.code_path:
            parts.append(f"code path {self.code_path}")
        if self.date:
            parts.append(self.date)
        return ", ".join(parts)


@dataclass(frozen=True)
class Variant:
    """One implementation's behaviour for a version range and a set of code paths.

    ``rules`` maps a format name to its rule; formats not in it take ``otherwise``.
    ``versions`` is the half-open range [low, high) of versions it applies to (None: open);
    ``code_paths`` the code paths it applies to (empty: every one); ``verified`` the versions
    it was checked on (default: the provenance's version; empty and no provenance version:
    a spec's rules, verified for every version)."""

    profile: str
    provenance: Provenance
    rules: Mapping[str, Rule] = field(default_factory=dict)
    otherwise: Rule = "ocp"
    versions: tuple[str | None, str | None] = (None, None)
    code_paths: tuple[str, ...] = ()
    verified: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()

    def policy(self, fmt: Format) -> Policy:
        """This variant's policy for ``fmt``."""
        return _apply(self.rules.get(fmt.name, self.otherwise), fmt)

    @property
    def verified_versions(self) -> tuple[str, ...]:
        if self.verified:
            return self.verified
        return (self.provenance.version,) if self.provenance.version else ()

    def applies_to_version(self, version: str) -> bool:
        v = _version_tuple(version)
        low, high = self.versions
        return (low is None or v >= _version_tuple(low)) and (high is None or v < _version_tuple(high))

    def applies_to_path(self, code_path: str | None) -> bool:
        return code_path is None or not self.code_paths or code_path in self.code_paths

    def is_verified(self, version: str) -> bool:
        """``version`` is one this variant was read off (a recorded "19" covers every 19.x.y)."""
        ours = self.verified_versions
        if not ours:
            return True
        v = _version_tuple(version)
        return any(v[:len(w)] == w for w in map(_version_tuple, ours))


@dataclass(frozen=True)
class Selection:
    """The answer of :func:`select`: the variant, whether it is verified for the version and
    code path asked, and a sentence saying why (naming what it was read off when unverified)."""

    variant: Variant
    verified: bool
    note: str


def _version_tuple(version: str) -> tuple[int, ...]:
    """The leading numeric components: '2.13.0+cpu' -> (2, 13, 0), '22.1.8' -> (22, 1, 8)."""
    out = []
    for part in version.split("."):
        m = re.match(r"\d+", part)
        if not m:
            break
        out.append(int(m.group()))
        if m.end() != len(part):
            break
    return tuple(out)


def _apply(rule: Rule, fmt: Format) -> Policy:
    if isinstance(rule, Policy):
        return rule
    if isinstance(rule, str):
        return PROFILES[rule](fmt)
    return rule(fmt)


def _distance(variant: Variant, version: str) -> tuple[int, ...]:
    v = _version_tuple(version)
    best: tuple[int, ...] | None = None
    for w in map(_version_tuple, variant.verified_versions or ("0",)):
        n = max(len(v), len(w))
        d = tuple(abs(a - b) for a, b in zip(v + (0,) * (n - len(v)), w + (0,) * (n - len(w)), strict=True))
        best = d if best is None or d < best else best
    assert best is not None
    return best


def select(profile: str, version: str | None = None, code_path: str | None = None) -> Selection:
    """The variant of ``profile`` for ``version`` on ``code_path``.

    Verified when a variant's version range and code paths hold them and ``version`` is one
    it was read off. Otherwise the nearest variant (the one whose recorded version is closest,
    on the code path asked where one has it), flagged unverified. ``version`` None: the
    default variant, verified only if it records no version (a spec's rules)."""
    cands = variants(profile)
    if version is None:
        path_ok = [c for c in cands if c.applies_to_path(code_path)]
        v0 = (path_ok or cands)[0]
        ok = bool(path_ok) and not v0.verified_versions
        return Selection(v0, ok, "the default variant" + ("" if ok else f", read off {v0.provenance.describe()}"))
    on_path = [c for c in cands if c.applies_to_path(code_path)]
    for c in on_path:
        if c.applies_to_version(version) and c.is_verified(version):
            return Selection(c, True, f"verified: read off {c.provenance.describe()}")
    pool = [c for c in on_path if c.applies_to_version(version)] or on_path or cands
    near = min(pool, key=lambda c: _distance(c, version))
    what = f"version {version}" + (f" on code path {code_path}" if code_path and not on_path else "")
    return Selection(near, False, f"unverified {what}: nearest is the one read off {near.provenance.describe()}")


def _discover() -> tuple[Variant, ...]:
    found: list[Variant] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for v in getattr(module, "VARIANTS", ()):
            if not isinstance(v, Variant):
                raise TypeError(f"{module.__name__}: VARIANTS must hold Variant records, got {v!r}")
            found.append(v)
    return tuple(found)


#: every variant of every profile, in module-name order (each module's own order within)
VARIANTS: tuple[Variant, ...] = _discover()


def variants(profile: str) -> tuple[Variant, ...]:
    """Every variant of ``profile`` (a name or alias), the default first; ValueError if none."""
    out = tuple(v for v in VARIANTS if profile == v.profile or profile in v.aliases)
    if not out:
        raise ValueError(f"unknown profile {profile!r}; choose one of: {', '.join(PROFILES)}")
    return out


def _defaults() -> dict[str, Callable[[Format], Policy]]:
    out: dict[str, Callable[[Format], Policy]] = {}
    for v in VARIANTS:
        for name in (v.profile, *v.aliases):
            out.setdefault(name, v.policy)
    return out


# the mutable table behind PROFILES (tests swap an entry with monkeypatch.setitem); PROFILES is
# read-only because a caller's PROFILES['x'] = ... would change every later call by that name
_PROFILES: dict[str, Callable[[Format], Policy]] = _defaults()
PROFILES: Mapping[str, Callable[[Format], Policy]] = MappingProxyType(_PROFILES)
