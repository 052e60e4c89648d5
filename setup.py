"""Build hook: the committed golden vectors (./vectors, the source of truth) ship inside the package.

setuptools reads everything else from pyproject.toml. The copy is made into the build directory
only, so the repository keeps one copy of every vector file.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

VECTORS = Path(__file__).resolve().parent / "vectors"


class BuildWithVectors(build_py):
    def run(self) -> None:
        super().run()
        if not (VECTORS / "manifest.json").is_file():
            raise SystemExit(f"{VECTORS}: no manifest.json; the golden vectors must ship with fmtsim")
        dest = Path(self.build_lib) / "fmtsim" / "vectors"
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(VECTORS, dest)


setup(cmdclass={"build_py": BuildWithVectors})
