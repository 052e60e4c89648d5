"""``fmtsim env``: what it reports is checked against facts found another way (importlib.metadata,
fake toolchains and CPU descriptions whose content the test writes, the profiles' own records)."""

from __future__ import annotations

import importlib.util
import json
import platform
import re
import stat
from importlib.metadata import version
from pathlib import Path

import pytest

from fmtsim.cli import main
from fmtsim.conformance import environment as envmod
from fmtsim.conformance import impls
from fmtsim.conformance.adapters import Adapter
from fmtsim.conformance.impls import hip
from fmtsim.conformance.plugin import Implementation

# the AMD EPYC: AVX-512 with BF16, no FP16, no AMX (flags line cut to what matters here)
EPYC = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 9654 96-Core Processor
flags\t\t: fpu sse sse2 avx avx2 fma avx512f avx512dq avx512bw avx512vl avx512_bf16 avx512_vnni gfni vaes

processor\t: 1
model name\t: AMD EPYC 9654 96-Core Processor
flags\t\t: fpu sse sse2 avx avx2 fma avx512f avx512dq avx512bw avx512vl avx512_bf16 avx512_vnni gfni vaes
"""
SAPPHIRE = "model name\t: Intel(R) Xeon(R) Platinum 8480+\nflags\t\t: avx2 avx512f avx512bw avx512vl " \
           "avx512dq avx512_bf16 avx512_fp16 amx_bf16 amx_tile amx_int8\n"
GRAVITON = ("processor\t: 0\nBogoMIPS\t: 2100.00\n"
            "Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt fcma "
            "lrcpc dcpop sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs paca pacg dcpodp "
            "svei8mm svebf16 i8mm bf16 dgh rng\nCPU implementer\t: 0x41\n")


def _script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


class _Absent(Implementation):
    name = "absent"
    summary = "needs a package nobody has"
    requires = ("no_such_package_fmtsim",)
    install = "pip install nothing-at-all-for-this-test"
    capabilities = ("encode",)
    profiles = ("ocp",)


class _NewLLVM(Implementation):
    """An implementation held to the apfloat profile in a version no profile was read off."""

    name = "newllvm"
    summary = "an LLVM nobody has checked yet"
    capabilities = ("encode",)
    profiles = ("apfloat",)

    def version(self) -> str:
        return "LLVM 99.0.1"

    def profile_version(self) -> str | None:
        return "99.0.1"

    def encoders(self, req):
        import fmtsim

        return [Adapter("newllvm", lambda x, f: fmtsim.encode(x, f, profile="apfloat"), profile="apfloat",
                        formats=("e4m3",), sources=("float32",))]


def _column(text: str, name: str, col: int) -> str:
    """The words of column ``col`` (0, 1, 2) of implementation ``name``'s row in the table."""
    lines = text.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith("implementation "))
    starts = [0] + [m.end() for m in re.finditer(r"-+  ", lines[head + 1])]
    starts.append(10**6)
    words: list[str] = []
    inside = False
    for ln in lines[head + 2:]:
        if not ln.strip():
            break
        if ln[:starts[1]].strip():
            inside = ln[:starts[1]].strip() == name
        if inside:
            words += ln[starts[col]:starts[col + 1]].split()
    return " ".join(words)


def test_the_version_shown_is_the_installed_distributions(capsys):
    assert main(["env", "--impl", "ml_dtypes"]) == 0
    out = capsys.readouterr().out
    assert _column(out, "ml_dtypes", 1) == f"ml_dtypes {version('ml_dtypes')}"
    st = envmod.implementation_status(impls.get_implementation("ml_dtypes"))
    assert st.version == f"ml_dtypes {version('ml_dtypes')}" and st.missing is None


def test_a_missing_package_shows_its_reason_wrapped(monkeypatch, capsys):
    monkeypatch.setitem(impls.registry(), "absent", _Absent())
    assert main(["env", "--impl", "absent", "ml_dtypes"]) == 0
    out = capsys.readouterr().out
    assert _column(out, "absent", 1) == ("cannot run: the no_such_package_fmtsim package is not installed "
                                         "(pip install nothing-at-all-for-this-test)")
    assert max(len(ln) for ln in out.splitlines()) <= 100
    st = envmod.implementation_status(_Absent())
    assert st.version is None and st.missing is not None and "no_such_package_fmtsim" in st.missing


def test_json_is_valid_and_lists_every_registered_implementation(capsys):
    assert main(["env", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [i["name"] for i in data["implementations"]] == list(impls.registry())
    for item, impl in zip(data["implementations"], impls.registry().values(), strict=True):
        assert [h["profile"] for h in item["held"]] == list(impl.profiles)
        assert (item["missing"] is None) == (impl.missing() is None)
    assert {"cpu", "toolchain", "build_cache"} <= set(data)
    assert set(data["toolchain"]) == {"cxx", "nvcc", "cuda_headers", "cuda_wheels", "hip_headers", "cpfloat_headers",
                                      "llvm"}


def test_the_text_table_fits_100_columns(capsys):
    assert main(["env"]) == 0
    lines = capsys.readouterr().out.splitlines()
    # a path longer than its column is kept whole (a broken one cannot be copied): such a line holds
    # nothing else past its column's start
    long = [ln for ln in lines if len(ln) > 100 and len(ln[ln.rfind("  ") + 2:].split()) > 1]
    assert not long, long
    for name in impls.registry():
        assert any(ln.startswith(f"{name} ") for ln in lines), name


@pytest.mark.parametrize("text,arch,want", [
    (EPYC, "x86_64", {"avx2": True, "avx512f": True, "avx512bw": True, "avx512vl": True, "avx512dq": True,
                      "avx512_bf16": True, "avx512_fp16": False,
                      "amx_tile": False, "amx_bf16": False, "amx_int8": False}),
    (SAPPHIRE, "x86_64", dict.fromkeys(envmod.X86_FEATURES, True)),
    (GRAVITON, "aarch64", {"neon": True, "sve": True, "sve2": False, "bf16": True}),
    ("processor\t: 0\nvendor_id\t: GenuineIntel\n", "x86_64", dict.fromkeys(envmod.X86_FEATURES)),  # no flags line
    ("processor\t: 0\nisa\t: rv64imafdc\n", "riscv64", {}),
])
def test_cpuinfo_text_parses_to_its_flags(text, arch, want):
    cpu = envmod.parse_cpuinfo(text, arch)
    assert cpu.features == want and cpu.arch == arch and cpu.source == "/proc/cpuinfo"


def test_the_model_name_and_a_flag_named_like_another_are_told_apart():
    cpu = envmod.parse_cpuinfo(EPYC, "x86_64")
    assert cpu.model == "AMD EPYC 9654 96-Core Processor"
    # avx512_vnni is in the line, avx512_fp16 is not: a substring match would be wrong either way
    cpu = envmod.parse_cpuinfo("flags\t: avx512_fp16x avx2x\n", "x86_64")
    assert cpu.features["avx512_fp16"] is False and cpu.features["avx2"] is False


def test_without_cpuinfo_sysctl_answers_and_a_missing_key_is_unknown(tmp_path):
    mac = {"hw.optional.neon": "1", "hw.optional.arm.FEAT_BF16": "0", "machdep.cpu.brand_string": "Apple M2"}
    cpu = envmod.cpu_info(tmp_path / "no-cpuinfo", "arm64", mac.get)
    assert cpu.features == {"neon": True, "sve": None, "sve2": None, "bf16": False}
    assert (cpu.model, cpu.source) == ("Apple M2", "sysctl")
    intel = {"machdep.cpu.features": "FPU SSE SSE2 AVX1.0", "machdep.cpu.leaf7_features": "AVX2 BMI1 BMI2"}
    cpu = envmod.cpu_info(tmp_path / "no-cpuinfo", "x86_64", intel.get)
    assert cpu.features["avx2"] is True and cpu.features["avx512f"] is False
    assert cpu.features["avx512_bf16"] is None  # no sysctl key names it: unknown, not "no"


def test_this_machines_instruction_sets_agree_with_torch():
    """PyTorch picks its kernels with cpuid: its capability names what /proc/cpuinfo must show."""
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        pytest.skip("reads /proc/cpuinfo on Linux x86-64")
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'fmtsim[torch]')")
    import os

    if os.environ.get("ATEN_CPU_CAPABILITY"):
        pytest.skip("ATEN_CPU_CAPABILITY overrides torch's own detection")
    cap = torch.backends.cpu.get_cpu_capability()
    feats = envmod.cpu_info().features
    if cap in ("AVX512", "AVX512_VNNI", "AVX512_BF16", "AMX"):
        assert feats["avx512f"] and feats["avx512bw"] and feats["avx2"]
    elif cap == "AVX2":
        assert feats["avx2"]
    else:
        assert cap == "DEFAULT" and not feats["avx2"], cap


def test_llvm_config_from_the_environment_is_listed_and_used(monkeypatch, tmp_path, capsys):
    fake = _script(tmp_path / "llvm-config", 'echo 22.1.8\n')
    monkeypatch.setenv("FMTSIM_LLVM_CONFIG", str(fake))
    llvm = envmod.toolchain()["llvm"]
    assert llvm["configs"][0] == {"path": str(fake), "version": "22.1.8", "used_by_apfloat": True}
    assert llvm["apfloat_uses"] == str(fake)
    assert sum(c["used_by_apfloat"] for c in llvm["configs"]) == 1
    old = _script(tmp_path / "old-llvm-config", 'echo 14.0.6\n')
    monkeypatch.setenv("FMTSIM_LLVM_CONFIG", str(old))
    llvm = envmod.toolchain()["llvm"]
    assert llvm["configs"][0] == {"path": str(old), "version": "14.0.6", "used_by_apfloat": False}
    assert llvm["apfloat_uses"] != str(old)
    monkeypatch.setenv("FMTSIM_LLVM_CONFIG", str(fake))
    assert main(["env", "--impl", "ml_dtypes"]) == 0
    out = capsys.readouterr().out
    assert f"llvm-config {fake}: LLVM 22.1.8 (apfloat uses this)" in " ".join(out.split())


def test_no_llvm_at_all_says_how_to_get_one(monkeypatch, tmp_path, capsys):
    from fmtsim.conformance.impls import apfloat

    monkeypatch.delenv("FMTSIM_LLVM_CONFIG", raising=False)
    monkeypatch.setattr(apfloat, "llvm_config_candidates", lambda: [])
    llvm = envmod.toolchain()["llvm"]
    assert llvm["configs"] == [] and llvm["apfloat_uses"] is None
    assert main(["env", "--impl", "apfloat"]) == 0
    text = capsys.readouterr().out
    assert "llvm-config none found (apfloat needs LLVM 19 or newer: apt-get install llvm-19-dev" in \
        " ".join(text.split())
    assert _column(text, "apfloat", 1).startswith("cannot run: no llvm-config of LLVM 19 or newer found")
    monkeypatch.setenv("FMTSIM_LLVM_CONFIG", str(tmp_path / "nowhere"))
    assert main(["env", "--impl", "ml_dtypes"]) == 0
    assert f"FMTSIM_LLVM_CONFIG={tmp_path / 'nowhere'}: no such file" in " ".join(capsys.readouterr().out.split())


def test_cxx_is_honoured(monkeypatch, tmp_path):
    fake = _script(tmp_path / "my-c++", 'echo "fake c++ 9.9.9"; echo "second line"\n')
    monkeypatch.setenv("CXX", str(fake))
    cxx = envmod.toolchain()["cxx"]
    assert cxx == {"path": str(fake), "version": "fake c++ 9.9.9", "from": "$CXX"}


def test_cuda_headers_from_cuda_home_with_their_version(monkeypatch, tmp_path):
    inc = tmp_path / "include"
    inc.mkdir()
    for h in ("cuda_fp8.h", "cuda_fp4.h"):
        (inc / h).write_text("")
    (inc / "cuda_runtime_api.h").write_text("#ifndef X\n#define CUDART_VERSION  12080\n#endif\n")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    got = envmod.toolchain()["cuda_headers"]
    assert got == {"dirs": [str(inc)], "from": "$CUDA_HOME", "version": "12.8"}


def test_hip_headers_with_and_without_a_version_header(monkeypatch, tmp_path, capsys):
    inc = tmp_path / "include"
    (inc / "hip" / "amd_detail").mkdir(parents=True)
    (inc / "hip" / "amd_detail" / "amd_hip_fp8.h").write_text("")
    monkeypatch.setenv("ROCM_PATH", str(tmp_path))
    monkeypatch.delenv("HIP_PATH", raising=False)
    assert envmod.toolchain()["hip_headers"] == {"dir": str(inc), "from": f"$ROCM_PATH ({inc})", "version": None}
    assert main(["env", "--impl", "ml_dtypes"]) == 0
    # wrapped where this machine's temporary path is long: read as one text
    assert "version unknown (no hip/hip_version.h)" in " ".join(capsys.readouterr().out.split())
    (inc / "hip" / "hip_version.h").write_text("#define HIP_VERSION_MAJOR 6\n#define HIP_VERSION_MINOR 4\n"
                                               "#define HIP_VERSION_PATCH 43482\n")
    assert hip.header_version(inc) == "6.4.43482"
    assert envmod.toolchain()["hip_headers"]["version"] == "6.4.43482"


def test_the_build_cache_lists_its_files(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("FMTSIM_CACHE", str(tmp_path / "cache"))
    assert envmod.build_cache() == {"path": str(tmp_path / "cache"), "from": "$FMTSIM_CACHE", "exists": False,
                                    "files": []}
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "cuda_shim-0123456789abcdef.so").write_bytes(b"x" * 3000)
    (tmp_path / "cache" / "hip_shim-fedcba9876543210.failed").write_text("hip: compiling failed")
    got = envmod.build_cache()
    assert got["exists"] and got["files"] == [{"name": "cuda_shim-0123456789abcdef.so", "bytes": 3000},
                                              {"name": "hip_shim-fedcba9876543210.failed", "bytes": 21}]
    assert main(["env", "--impl", "ml_dtypes"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"{tmp_path / 'cache'} (from $FMTSIM_CACHE): 2 files, 3 KiB" in out
    assert "cuda_shim-0123456789abcdef.so 3 KiB hip_shim-fedcba9876543210.failed 21 B (a failed compile" in out


@pytest.mark.parametrize("name,module", [("ml_dtypes", "ml_dtypes"), ("onnxruntime", "onnxruntime"),
                                         ("torchao", "torchao"), ("xla", "jax")])
def test_the_version_profiles_are_keyed_by_is_the_implementations_own(name, module):
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed")
    assert impls.get_implementation(name).profile_version() == version(module)


def test_cuda_is_keyed_by_its_headers_version():
    from fmtsim.conformance.impls import cuda

    impl = impls.get_implementation("cuda")
    if impl.missing() is not None:
        pytest.skip(impl.missing())
    dirs, _ = cuda.find_include_dirs()
    assert impl.profile_version() == cuda.header_version(dirs)  # the shim's CUDART_VERSION, the text's


def test_a_version_no_profile_was_read_off_says_so(monkeypatch, capsys):
    from fmtsim.profiles import select

    st = envmod.implementation_status(_NewLLVM())
    (held,) = st.held
    read_off = select("apfloat", "99.0.1").variant.provenance.version  # the variant nearest 99
    assert not held.verified and held.status == f"unverified version 99.0.1 (profile read off {read_off})"
    # conform prints the same header line for it
    monkeypatch.setitem(impls.registry(), "newllvm", _NewLLVM())
    main(["conform", "--impl", "newllvm", "--quick", "--formats", "e4m3"])
    out = capsys.readouterr().out
    assert envmod.header_line(st) in out
    assert f"newllvm: LLVM 99.0.1; apfloat unverified version 99.0.1 (profile read off {read_off})" in out


def test_a_verified_version_and_a_spec_say_so():
    from fmtsim.profiles import select

    ml = envmod.implementation_status(impls.get_implementation("ml_dtypes"))
    sel = select("ml_dtypes", version("ml_dtypes"))
    assert ml.held[0].verified == sel.verified
    if sel.verified:
        assert ml.held[0].status == "verified on " + ", ".join(sel.variant.verified_versions)
    own = envmod.implementation_status(impls.get_implementation("fmtsim"))
    assert [(h.label, h.verified) for h in own.held] == [("ocp", True)]


def test_a_code_path_no_variant_was_read_off_says_so():
    class ArmKong(Implementation):
        name = "armkong"
        profiles = ("numkong_simd", "numkong_serial")

        def version(self) -> str:
            return "numkong 7.8.6"

        def profile_version(self) -> str | None:
            return "7.8.6"

        def code_path(self) -> str | None:
            return "Arm SIMD"

    simd, serial = envmod.implementation_status(ArmKong()).held
    assert simd.label == "numkong_simd[Arm SIMD]" and not simd.verified
    assert simd.status == "unverified code path Arm SIMD (profile read off 7.8, code path x86 SIMD)"
    assert not serial.verified and serial.status.startswith("unverified code path Arm SIMD")


def test_the_label_names_the_code_path_a_variant_was_read_off():
    if importlib.util.find_spec("numkong") is None:
        pytest.skip("numkong is not installed (pip install 'fmtsim[runtimes]')")
    held = envmod.implementation_status(impls.get_implementation("numkong")).held
    assert [h.label for h in held] == ["numkong_simd[x86 SIMD]", "numkong_serial[serial]"]


def test_conform_with_profile_says_every_entry_point_is_held_to_it(capsys):
    assert main(["conform", "--impl", "ml_dtypes", "--quick", "--formats", "e2m1", "--profile", "ocp"]) in (0, 1)
    assert f"ml_dtypes: ml_dtypes {version('ml_dtypes')}; held to --profile ocp" in capsys.readouterr().out


def test_a_long_header_line_wraps_whole_parts_under_100_columns():
    st = envmod.ImplementationStatus("wide", "", "wide 1.0", None, tuple(
        envmod.Held(f"profile_{i}", f"profile_{i}[some code path]", "some code path", False,
                    "unverified version 1.0 (profile read off 0.9)", "") for i in range(4)))
    lines = envmod.header_line(st).splitlines()
    assert len(lines) > 1 and max(map(len, lines)) <= 100
    assert all(ln.startswith("    ") for ln in lines[1:])
    assert " ".join(ln.strip() for ln in lines) == "wide: wide 1.0; " + "; ".join(
        f"profile_{i}[some code path] unverified version 1.0 (profile read off 0.9)" for i in range(4))


def test_an_unknown_implementation_is_a_usage_error(capsys):
    assert main(["env", "--impl", "nope"]) == 2
    assert "unknown implementation 'nope'" in capsys.readouterr().err


def test_a_failing_version_query_is_reported_and_keys_no_variant():
    class Broken(_NewLLVM):
        def version(self) -> str:
            raise RuntimeError("shim for LLVM 19 did not load")

    st = envmod.implementation_status(Broken())
    assert st.version == "version unknown (RuntimeError: shim for LLVM 19 did not load)"
    assert not st.held[0].verified and st.held[0].status.startswith("version unknown (profile read off ")


def test_an_adapter_spec_is_refused_by_name(capsys):
    assert main(["env", "--impl", "my_kernels.py:encode"]) == 2
    assert "not an adapter (my_kernels.py:encode)" in capsys.readouterr().err


def test_a_plugin_profile_fmtsim_lacks_is_reported_not_raised():
    class Stranger(_NewLLVM):
        profiles = ("no_such_profile_anywhere",)

    (held,) = envmod.implementation_status(Stranger()).held
    assert not held.verified and held.status == "no such profile in fmtsim.profiles"


class _Chatty(Implementation):
    name = "chatty"
    summary = "a package whose import logs a warning and an error"
    requires = ("fmtsim_test_chatty_pkg",)
    imports = ("fmtsim_test_chatty_pkg.sub",)
    capabilities = ("decode",)


def test_what_a_peer_logs_while_importing_is_held_for_env_and_errors_pass(monkeypatch, tmp_path, capsys,
                                                                          caplog):
    """A peer's import-time log warnings (torchao's CUDA-only extensions on a CPU build) are kept out
    of conform's output and listed by ``fmtsim env``; an error it logs still reaches the user."""
    pkg = tmp_path / "fmtsim_test_chatty_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("import logging\nlogging.getLogger('chatty').warning('no GPU kernel here')\n")
    (pkg / "sub.py").write_text("import logging\nlogging.getLogger('chatty.sub').error('a real problem')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(impls.registry(), "chatty", _Chatty())
    with caplog.at_level("DEBUG"):
        assert _Chatty().missing() is None
    assert [r.getMessage() for r in caplog.records] == ["a real problem"]  # the warning was held back
    assert main(["env", "--impl", "chatty"]) == 0
    out = capsys.readouterr().out
    assert "logged by the implementations' own packages while importing" in out
    assert re.search(r"^chatty\s+chatty: no GPU kernel here$", out, re.M), out
    assert "a real problem" not in out
