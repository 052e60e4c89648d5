"""The installed package is complete and is what the tests run against.

CI (.ci/run) installs a wheel built from the sdist and sets FMTSIM_REQUIRE_INSTALLED to the
checkout's path: then fmtsim must not be imported from inside the checkout, and the installed
package must hold every module of fmtsim/, py.typed and the committed golden vectors, byte for
byte. Without the variable (a developer's editable install) the same checks run where they apply.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import fmtsim

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = Path(fmtsim.__file__).resolve().parent
REQUIRED = os.environ.get("FMTSIM_REQUIRE_INSTALLED")


def test_fmtsim_is_the_installed_package():
    if REQUIRED:
        checkout = Path(REQUIRED).resolve()
        assert not PACKAGE.is_relative_to(checkout), (
            f"fmtsim was imported from {PACKAGE}, inside the checkout {checkout}: the tests must run "
            "against the installed wheel")
    else:
        # a developer's run: an installed fmtsim, or this checkout's fmtsim/ through an editable
        # install (tests/conftest.py has already refused the tree standing in for a real install)
        assert PACKAGE == ROOT / "fmtsim" or not PACKAGE.is_relative_to(ROOT)


def test_every_module_installed():
    sources = sorted(p.relative_to(ROOT).with_suffix("") for p in (ROOT / "fmtsim").rglob("*.py"))
    assert len(sources) > 20
    for rel in sources:
        name = ".".join(rel.parts).removesuffix(".__init__")
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin is not None, f"{name} is missing from the installed package"
        assert Path(spec.origin).resolve().is_relative_to(PACKAGE), (name, spec.origin)
    assert (PACKAGE / "py.typed").is_file()
    # the C++ and C sources the package compiles on the user's machine (shims, the compiled engine)
    for src in sorted([*(ROOT / "fmtsim").rglob("*.cpp"), *(ROOT / "fmtsim").rglob("*.c")]):
        assert (PACKAGE / src.relative_to(ROOT / "fmtsim")).is_file(), f"{src.name} is missing from the package"


def test_golden_vectors_installed_unchanged():
    from fmtsim.conformance.run import find_vectors

    found = find_vectors()
    assert found is not None and (found / "manifest.json").is_file()
    if REQUIRED:
        assert found == PACKAGE / "vectors"
    committed = sorted(p.name for p in (ROOT / "vectors").iterdir())
    installed = sorted(p.name for p in found.iterdir())
    assert installed == committed
    for name in committed:
        assert (found / name).read_bytes() == (ROOT / "vectors" / name).read_bytes(), name


def test_entry_points_work_outside_the_checkout(tmp_path):
    bindir = Path(sys.executable).parent
    env = dict(os.environ, PATH=str(bindir) + os.pathsep + os.environ.get("PATH", ""))
    name = "f32_to_e2m1.rne.satfinite.encode_ties.tv"
    gen = subprocess.run(["fmtsim", "gen", name], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    assert gen.returncode == 0, gen.stderr
    (tmp_path / "out.tv").write_text(gen.stdout)
    ver = subprocess.run(["fmtsim", "ver", name, "out.tv"], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=120)
    assert ver.returncode == 0 and " 0 failed" in ver.stdout, ver.stdout + ver.stderr
    wrong = gen.stdout.replace(" 0C ", " 0D ", 1)
    assert wrong != gen.stdout
    (tmp_path / "bad.tv").write_text(wrong)
    ver = subprocess.run(["fmtsim", "ver", name, "bad.tv"], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=120)
    assert ver.returncode == 1 and " 1 failed" in ver.stdout
    mod = subprocess.run([sys.executable, "-m", "fmtsim", "--version"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=60)
    assert mod.returncode == 0 and fmtsim.__version__ in mod.stdout
