"""Ships the library inside the wheel (the project's metadata is in pyproject.toml).

The case cards, editions, prompts, rubrics, panels and configs stay at the repository's top
level, where they are edited and reviewed; at build time they are copied into the package as
emobench/library/, which an installed emobench reads (emobench/library_paths.py). An editable
install reads the checkout itself and gets no copy.
"""

from __future__ import annotations

import runpy
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
# Read from the module the package uses, without importing the package (its dependencies may be absent).
LIBRARY_ITEMS: tuple[str, ...] = runpy.run_path(str(HERE / "emobench" / "library_paths.py"))["LIBRARY_ITEMS"]


class BuildWithLibrary(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        target = Path(self.build_lib) / "emobench" / "library"
        shutil.rmtree(target, ignore_errors=True)  # no file left over from an earlier build
        target.mkdir(parents=True)
        for item in LIBRARY_ITEMS:
            source = HERE / item
            if source.is_dir():
                shutil.copytree(source, target / item, ignore=shutil.ignore_patterns("__pycache__", "*.py[cod]"))
            else:
                shutil.copy2(source, target / item)


setup(cmdclass={"build_py": BuildWithLibrary})
