"""Ships the library inside the wheel (the project's metadata is in pyproject.toml).

The case cards, editions, prompts, rubrics, panels and configs stay at the repository's top
level, where they are edited and reviewed; at build time they are copied into the package as
emobench/library/, which an installed emobench reads (emobench/library_paths.py), with the
commit built from in emobench/library/build.json, which run manifests record as git_sha. An
editable install reads the checkout itself and gets no copy.
"""

from __future__ import annotations

import json
import runpy
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
# Read from the module the package uses, without importing the package (its dependencies may be absent).
_PATHS = runpy.run_path(str(HERE / "emobench" / "library_paths.py"))
LIBRARY_ITEMS: tuple[str, ...] = _PATHS["LIBRARY_ITEMS"]


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
        # The commit the installed library comes from; an installed package has no checkout to ask.
        build_info = {"git_sha": _PATHS["checkout_sha"](HERE)}
        (target / _PATHS["BUILD_INFO"]).write_text(json.dumps(build_info) + "\n", encoding="utf-8")


setup(cmdclass={"build_py": BuildWithLibrary})
