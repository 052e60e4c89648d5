"""What this machine has for ``fmtsim conform``: ``fmtsim env`` and conform's header lines.

For every registered implementation: the version it would run (or why it cannot run: its
``missing()``) and the profile variant it is held to (:func:`fmtsim.profiles.select` on that
version and the code path the implementation reports), verified or not. For the machine: the
CPU's instruction sets that pick kernels (x86: AVX2, AVX-512 F/BW/BF16/FP16, AMX; Arm: NEON,
SVE, BF16), the C++ compiler, CUDA (nvcc, headers, NVIDIA's pip wheels), HIP and CPFloat headers, every
llvm-config and the one apfloat uses, and the build cache. Where nothing says, the answer is
"unknown", never a guess.

The detection itself lives with what uses it (shim_build: compiler and cache; impls.cuda,
impls.hip: headers; impls.apfloat: llvm-config); this module only asks. Asking an
implementation's ``missing()`` and ``version()`` may compile its shim once (cached), as
``fmtsim conform`` would.
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..profiles import Selection, select
from .plugin import IMPORT_MESSAGES, Implementation

__all__ = ["Held", "ImplementationStatus", "Cpu", "X86_FEATURES", "ARM_FEATURES", "implementation_status",
           "header_line", "cpu_info", "parse_cpuinfo", "toolchain", "build_cache",
           "environment", "render"]

WIDTH = 100  # the widest line render() and header_line() write

# instruction sets that pick a conversion kernel, by their Linux /proc/cpuinfo names
X86_FEATURES = ("avx2", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_bf16", "avx512_fp16", "amx_tile",
                "amx_bf16", "amx_int8")
ARM_FEATURES = ("neon", "sve", "sve2", "bf16")
# Linux aarch64 calls NEON "asimd" (32-bit Arm kernels say "neon")
_ARM_CPUINFO = {"neon": ("asimd", "neon"), "sve": ("sve",), "sve2": ("sve2",), "bf16": ("bf16",)}
# macOS sysctl keys (a missing key is "unknown": Apple documents no key for the others)
_X86_SYSCTL = {"avx2": "AVX2", "avx512f": "AVX512F", "avx512bw": "AVX512BW", "avx512vl": "AVX512VL",
               "avx512dq": "AVX512DQ"}
_ARM_SYSCTL = {"neon": "hw.optional.neon", "sve": "hw.optional.arm.FEAT_SVE", "bf16": "hw.optional.arm.FEAT_BF16"}


# ---------------------------------------------------------------------------------------------
# implementations


@dataclass(frozen=True)
class Held:
    """One profile an implementation is held to, and the variant of it that applies here."""

    profile: str
    label: str  # the profile, with the code path in brackets where one is known
    code_path: str | None  # the code path the implementation reports (code_path())
    verified: bool
    status: str  # "verified on 19", "unverified version 22.1.8 (profile read off 19.1.7)", ...
    read_off: str  # the variant's provenance, in words


@dataclass(frozen=True)
class ImplementationStatus:
    """One implementation as it stands here: what would run, or why nothing can."""

    name: str
    summary: str
    version: str | None  # what version() says; None when it cannot run or does not say
    missing: str | None  # why it cannot run here (its missing()), None when it can
    held: tuple[Held, ...] = ()
    checked_with: str = ""
    import_messages: tuple[str, ...] = ()  # what its packages logged while importing (plugin.IMPORT_MESSAGES)


def _label(profile: str, sel: Selection, code_path: str | None) -> str:
    """The profile, with the code path in brackets: the one the implementation reports, else
    the one its variant names (numkong_simd[x86 SIMD], torch[CPU])."""
    paths = sel.variant.code_paths
    path = code_path or (paths[0] if len(paths) == 1 else None)
    return f"{profile}[{path}]" if path else profile


def _status(sel: Selection, version: str | None, code_path: str | None) -> str:
    v = sel.variant
    theirs = ", ".join(v.verified_versions)
    prov = v.provenance
    off = ", ".join(p for p in (prov.version, prov.code_path and f"code path {prov.code_path}") if p)
    if sel.verified:
        return f"verified on {theirs}" if theirs else "verified (a spec's rules: every version)"
    if not v.applies_to_path(code_path):
        return f"unverified code path {code_path} (profile read off {off or prov.read_off})"
    if version is None:
        return f"version unknown (profile read off {off or prov.read_off})"
    return f"unverified version {version} (profile read off {off or prov.read_off})"


def implementation_status(impl: Implementation) -> ImplementationStatus:
    """What ``impl`` would be here: its version or why it cannot run, each profile's variant
    (:func:`fmtsim.profiles.select` on its ``profile_version()`` and ``code_path()``)."""
    why = impl.missing()
    version: str | None = None
    key: str | None = None  # the version the profiles are keyed by
    path: str | None = None
    if why is None:
        try:
            version = impl.version() or None
            key, path = impl.profile_version(), impl.code_path()
        except Exception as e:  # a version query must not hide the rest of the report
            version = f"version unknown ({type(e).__name__}: {e})"
            key = path = None
    held = []
    for profile in impl.profiles:
        try:
            sel = select(profile, key, path)
        except ValueError:  # a plugin's profile fmtsim has no variants of
            held.append(Held(profile, profile, path, False, "no such profile in fmtsim.profiles", ""))
            continue
        held.append(Held(profile, _label(profile, sel, path), path, sel.verified, _status(sel, key, path),
                         sel.variant.provenance.describe()))
    said = tuple(m for mod in (*impl.requires, *impl.imports) for m in IMPORT_MESSAGES.get(mod, ()))
    return ImplementationStatus(impl.name, impl.summary, version, why, tuple(held), impl.checked_with,
                                tuple(dict.fromkeys(said)))


def header_line(status: ImplementationStatus | Implementation, profile: str | None = None,
                width: int = WIDTH) -> str:
    """The line ``fmtsim conform`` prints for an implementation it runs (wrapped to ``width``):
    ``name: version; profile[code path] verified on V`` (or unverified, and what it was read
    off); ``profile``: conform's --profile, which every entry point is held to instead."""
    st = status if isinstance(status, ImplementationStatus) else implementation_status(status)
    first = f"{st.name}: {st.version or 'version unknown'}" if st.missing is None else \
        f"{st.name}: cannot run here: {st.missing}"
    held = [f"held to --profile {profile}"] if profile is not None else [f"{h.label} {h.status}" for h in st.held]
    parts = [first, *held]
    # a part that fits stays whole on one line; the continuation lines are indented
    lines: list[str] = []
    for i, part in enumerate(parts):
        piece = part + (";" if i < len(parts) - 1 else "")
        if lines and len(lines[-1]) + 1 + len(piece) <= width:
            lines[-1] += " " + piece
            continue
        lines += textwrap.wrap(piece, width, initial_indent="    " if lines else "", subsequent_indent="    ",
                               break_on_hyphens=False)
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# the CPU


@dataclass(frozen=True)
class Cpu:
    """The CPU's architecture and name, and each instruction set fmtsim asks about: present,
    absent or unknown."""

    arch: str  # platform.machine(): x86_64, aarch64, arm64, ...
    model: str  # the CPU's name where the system says it, else ""
    source: str  # where the features were read: /proc/cpuinfo, sysctl, or "" (nowhere)
    features: dict[str, bool | None] = field(default_factory=dict)  # None: unknown


def _family(arch: str) -> str:
    a = arch.lower()
    if a in ("x86_64", "amd64", "i386", "i686", "x86"):
        return "x86"
    if a in ("aarch64", "arm64") or a.startswith("arm"):
        return "arm"
    return ""


def parse_cpuinfo(text: str, arch: str) -> Cpu:
    """The instruction sets /proc/cpuinfo's text says the (first) CPU has. A flags line that is
    not there makes every feature unknown (None); a flag not in the line is absent (False)."""
    fam = _family(arch)
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() and key.strip() not in fields:
            fields[key.strip()] = value.strip()
    model = fields.get("model name") or fields.get("Hardware") or fields.get("cpu model") or ""
    if fam == "x86":
        flags = fields.get("flags")
        have = set(flags.split()) if flags is not None else None
        feats = {f: (None if have is None else f in have) for f in X86_FEATURES}
    elif fam == "arm":
        flags = fields.get("Features")
        have = set(flags.split()) if flags is not None else None
        feats = {f: (None if have is None else any(n in have for n in _ARM_CPUINFO[f])) for f in ARM_FEATURES}
    else:
        feats = {}
    return Cpu(arch, model, "/proc/cpuinfo", feats)


def _sysctl(key: str) -> str | None:
    try:
        r = subprocess.run(["sysctl", "-n", key], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def _from_sysctl(arch: str, sysctl: Callable[[str], str | None]) -> Cpu:
    fam = _family(arch)
    model = sysctl("machdep.cpu.brand_string") or ""
    feats: dict[str, bool | None] = {}
    if fam == "x86":
        words = [sysctl(k) for k in ("machdep.cpu.features", "machdep.cpu.leaf7_features")]
        have = set(" ".join(w for w in words if w).upper().split()) if any(words) else None
        for f in X86_FEATURES:
            name = _X86_SYSCTL.get(f)
            feats[f] = None if have is None or name is None else name in have
    elif fam == "arm":
        for f in ARM_FEATURES:
            key = _ARM_SYSCTL.get(f)
            value = sysctl(key) if key else None
            feats[f] = None if value not in ("0", "1") else value == "1"
    return Cpu(arch, model, "sysctl", feats)


def cpu_info(cpuinfo: Path = Path("/proc/cpuinfo"), arch: str | None = None,
             sysctl: Callable[[str], str | None] | None = None) -> Cpu:
    """This machine's CPU: /proc/cpuinfo on Linux, sysctl on macOS, else every feature unknown."""
    arch = arch or platform.machine()
    try:
        return parse_cpuinfo(cpuinfo.read_text(errors="replace"), arch)
    except OSError:
        pass
    if sysctl is not None or sys.platform == "darwin":
        return _from_sysctl(arch, sysctl or _sysctl)
    fam = _family(arch)
    names = X86_FEATURES if fam == "x86" else ARM_FEATURES if fam == "arm" else ()
    return Cpu(arch, platform.processor(), "", {f: None for f in names})


# ---------------------------------------------------------------------------------------------
# compilers, headers, the build cache


def _first_line(cmd: Sequence[str]) -> str | None:
    try:
        r = subprocess.run(list(cmd), capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [ln.strip() for ln in (r.stdout or r.stderr).splitlines() if ln.strip()]
    return lines[0] if r.returncode == 0 and lines else None


def _nvcc_release(nvcc: str) -> str | None:
    try:
        r = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"release ([\d.]+), (V[\d.]+)", r.stdout)
    return f"{m.group(1)} ({m.group(2)})" if m else None


def toolchain() -> dict[str, Any]:
    """The compilers and headers the shims are built with, as found by the code that builds them."""
    from .impls import apfloat, cpfloat, cuda, hip
    from .shim_build import find_compiler

    cxx = find_compiler()
    out: dict[str, Any] = {"cxx": {"path": cxx, "version": _first_line([cxx, "--version"]) if cxx else None,
                                   "from": "$CXX" if os.environ.get("CXX") else "PATH"}}
    nvcc = cuda.find_nvcc()
    out["nvcc"] = {"path": nvcc, "version": _nvcc_release(nvcc) if nvcc else None}
    dirs, origin = cuda.find_include_dirs()
    out["cuda_headers"] = {"dirs": [str(d) for d in dirs or []], "from": origin or None,
                           "version": cuda.header_version(dirs) if dirs else None}
    wheels = cuda.wheel_include_dirs()
    out["cuda_wheels"] = {"dirs": [str(d) for d in wheels or []],
                          "version": cuda.header_version(wheels) if wheels else None}
    inc, hip_origin = hip.find_include_dir()
    out["hip_headers"] = {"dir": str(inc) if inc else None, "from": hip_origin or None,
                          "version": hip.header_version(inc) if inc else None}
    cp_inc, cp_origin = cpfloat.find_include_dir()
    out["cpfloat_headers"] = {"dir": str(cp_inc) if cp_inc else None, "from": cp_origin or None,
                              "version": cpfloat.header_version(cp_inc) if cp_inc else None}
    chosen, why = apfloat.find_llvm_config()
    named = os.environ.get("FMTSIM_LLVM_CONFIG") or None
    configs, seen = [], set()
    for c in ([named] if named and os.path.exists(named) else []) + apfloat.llvm_config_candidates():
        real = os.path.realpath(c)
        if real in seen:  # llvm-config-19 on PATH is often a link to /usr/lib/llvm-19/bin/llvm-config
            continue
        seen.add(real)
        configs.append({"path": c, "version": apfloat.llvm_version(c),
                        "used_by_apfloat": chosen is not None and real == os.path.realpath(chosen)})
    out["llvm"] = {"configs": configs, "apfloat_uses": chosen, "why_none": why or None,
                   "fmtsim_llvm_config": named, "minimum_major": apfloat.MIN_MAJOR}
    return out


def build_cache() -> dict[str, Any]:
    """Where the compiled shims are cached and what is there (a ``.failed`` file is a compile
    that failed, remembered so that it is not tried again)."""
    from .shim_build import cache_dir

    d = cache_dir()
    how = "$FMTSIM_CACHE" if os.environ.get("FMTSIM_CACHE") else (
        "$XDG_CACHE_HOME/fmtsim" if os.environ.get("XDG_CACHE_HOME") else "~/.cache/fmtsim")
    files = []
    if d.is_dir():
        for p in sorted(d.iterdir()):
            if p.is_file():
                files.append({"name": p.name, "bytes": p.stat().st_size})
    return {"path": str(d), "from": how, "exists": d.is_dir(), "files": files}


# ---------------------------------------------------------------------------------------------
# the report


def environment(names: Sequence[str] | None = None) -> dict[str, Any]:
    """Everything ``fmtsim env`` reports, as plain data (what ``--json`` writes)."""
    from .. import __version__
    from .impls import get_implementation, registry

    for n in names or ():
        if ":" in n:
            raise ValueError(f"env reports registered implementations, not an adapter ({n}): an adapter's version "
                             "and profile are what its own code says")
    chosen = [get_implementation(n) for n in names] if names else list(registry().values())
    return {
        "fmtsim": __version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "implementations": [asdict(implementation_status(i)) for i in chosen],
        "cpu": asdict(cpu_info()),
        "toolchain": toolchain(),
        "build_cache": build_cache(),
    }


def _table(rows: list[list[str]], widths: list[int]) -> list[str]:
    """Rows of cells, each column wrapped to its width (a cell's own newlines kept)."""
    out = []
    for row in rows:
        cells = []
        for text, w in zip(row, widths, strict=True):
            lines: list[str] = []
            for part in text.split("\n"):
                # a path longer than the column stays whole: a broken one cannot be copied
                lines.extend(textwrap.wrap(part, w, subsequent_indent="  ", break_on_hyphens=False,
                                           break_long_words=False) or [""])
            cells.append(lines)
        for i in range(max(len(c) for c in cells)):
            out.append("  ".join((c[i] if i < len(c) else "").ljust(w)
                                 for c, w in zip(cells, widths, strict=True)).rstrip())
    return out


def _yes_no(v: bool | None) -> str:
    return "unknown" if v is None else "yes" if v else "no"


def _size(n: int) -> str:
    return f"{n} B" if n < 1024 else f"{n / 1024:.0f} KiB" if n < 1024 * 1024 else f"{n / 1024 ** 2:.1f} MiB"


def render(env: dict[str, Any]) -> str:
    """``environment()`` as the text ``fmtsim env`` prints (lines of at most 100 columns)."""
    lines = [f"fmtsim {env['fmtsim']}, Python {env['python']}, {env['platform']}", "",
             "implementations (fmtsim conform --impl NAME)"]
    rows = [["implementation", "version, or why it cannot run", "held to (profile variant here)"],
            ["-" * 14, "-" * 38, "-" * 44]]
    for st in env["implementations"]:
        why = st["missing"]
        if why is not None and why.startswith(f"{st['name']}: "):  # the reasons name their implementation
            why = why[len(st["name"]) + 2:]
        what = st["version"] or "version unknown" if why is None else f"cannot run: {why}"
        held = "\n".join(f"{h['label']} {h['status']}" for h in st["held"]) or "no profile"
        rows.append([st["name"], what, held])
    lines += _table(rows, [14, 38, 44])
    said = [(st["name"], m) for st in env["implementations"] for m in st.get("import_messages", ())]
    if said:  # held back from conform's output; a reader who wants them finds them here
        lines += ["", "logged by the implementations' own packages while importing (not by fmtsim)"]
        lines += _table([[name, m] for name, m in said], [14, 84])

    cpu, tc, cache = env["cpu"], env["toolchain"], env["build_cache"]
    kv: list[list[str]] = []
    where = f" (from {cpu['source']})" if cpu["source"] else " (no /proc/cpuinfo or sysctl: features unknown)"
    kv.append(["CPU", f"{cpu['model'] or 'model unknown'}, {cpu['arch']}{where}"])
    kv.append(["instruction sets", ", ".join(f"{k} {_yes_no(v)}" for k, v in cpu["features"].items())
               or "none that fmtsim's profiles depend on for this architecture"])
    cxx = tc["cxx"]
    how = "from $CXX" if cxx["from"] == "$CXX" else "found on PATH; set CXX to choose another"
    kv.append(["C++ compiler", f"{cxx['path']}: {cxx['version'] or 'version unknown'} ({how})"
               if cxx["path"] else "none found (set CXX, or install g++): cuda, hip, apfloat cannot run"])
    nv = tc["nvcc"]
    kv.append(["nvcc", f"{nv['path']}: release {nv['version'] or 'unknown'}" if nv["path"] else "not on PATH"])
    ch = tc["cuda_headers"]
    kv.append(["CUDA headers", f"{', '.join(ch['dirs'])} (from {ch['from']}): CUDA {ch['version'] or 'unknown'}"
               if ch["dirs"] else "not found ($CUDA_HOME, $CUDA_PATH, beside nvcc, /usr/local/cuda, pip wheels)"])
    cw = tc["cuda_wheels"]
    kv.append(["NVIDIA wheels", f"{', '.join(cw['dirs'])}: CUDA {cw['version'] or 'unknown'}" if cw["dirs"]
               else 'not installed (pip install "fmtsim[cuda]": nvidia-cuda-runtime, -crt, -cccl)'])
    hh = tc["hip_headers"]
    kv.append(["HIP headers", f"{hh['dir']} (from {hh['from']}): "
               + (f"HIP {hh['version']}" if hh["version"] else "version unknown (no hip/hip_version.h)")
               if hh["dir"] else "not found ($ROCM_PATH, $HIP_PATH, /opt/rocm)"])
    cp = tc["cpfloat_headers"]
    kv.append(["CPFloat headers", f"{cp['dir']} (from {cp['from']}): "
               + (f"CPFloat {cp['version']}" if cp["version"] else "version unknown (no license.spdx beside them)")
               if cp["dir"] else "not found ($CPFLOAT_INCLUDE, $CPFLOAT_PATH, $CPATH, /usr/local/include, "
               "/usr/include)"])
    llvm = tc["llvm"]
    cfgs = [f"{c['path']}: LLVM {c['version'] or 'unknown'}"
            + (" (apfloat uses this)" if c["used_by_apfloat"] else "") for c in llvm["configs"]]
    if llvm["fmtsim_llvm_config"] and not any(c["path"] == llvm["fmtsim_llvm_config"] for c in llvm["configs"]):
        cfgs.insert(0, f"FMTSIM_LLVM_CONFIG={llvm['fmtsim_llvm_config']}: no such file")
    if llvm["apfloat_uses"] is None:
        cfgs.append(f"none of LLVM {llvm['minimum_major']} or newer: apfloat cannot run"
                    + (f" ({llvm['why_none']})" if llvm["why_none"] else ""))
    if not llvm["configs"] and not llvm["fmtsim_llvm_config"]:
        cfgs = [f"none found (apfloat needs LLVM {llvm['minimum_major']} or newer: apt-get install "
                f"llvm-{llvm['minimum_major']}-dev, or set FMTSIM_LLVM_CONFIG)"]
    kv.append(["llvm-config", "\n".join(cfgs)])
    total = sum(f["bytes"] for f in cache["files"])
    head = f"{cache['path']} (from {cache['from']}): " + (
        f"{len(cache['files'])} files, {_size(total)}" if cache["exists"] else "not created yet")
    files = [f"{f['name']} {_size(f['bytes'])}" + (" (a failed compile, remembered: delete it to try again)"
                                                   if f["name"].endswith(".failed") else "") for f in cache["files"]]
    kv.append(["build cache", "\n".join([head, *files])])
    lines += ["", "machine"] + _table(kv, [16, 82])
    return "\n".join(lines)
